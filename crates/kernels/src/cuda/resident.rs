//! Device copies of host arrays that outlive every launch (a model's weights): uploaded on first use, then reused.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};

use super::device::Gpu;

type Key = (TypeId, usize, usize);

/// Device copies keyed by the host array's address and length; the owner keeps the host arrays alive and unchanged while it holds this.
#[derive(Default)]
pub struct Resident {
    copies: Mutex<HashMap<Key, Arc<dyn Any + Send + Sync>>>,
    bytes: Mutex<usize>,
}

impl Resident {
    /// The device copy of `host`, uploaded the first time it is asked for.
    pub fn get<T>(&self, gpu: &Gpu, host: &[T]) -> Result<Arc<CudaSlice<T>>, String>
    where
        T: DeviceRepr + ValidAsZeroBits + Unpin + Send + Sync + 'static,
        CudaSlice<T>: Send + Sync,
    {
        let key = (TypeId::of::<T>(), host.as_ptr() as usize, host.len());
        let mut copies = self.copies.lock().expect("resident copies poisoned");
        if let Some(c) = copies.get(&key) {
            return Ok(c
                .clone()
                .downcast::<CudaSlice<T>>()
                .expect("resident copy keyed by its type"));
        }
        // On the process stream, so work on either stream that asks for it later is ordered after the copy.
        let copy = Arc::new(gpu.upload_shared(host)?);
        *self.bytes.lock().expect("resident bytes poisoned") += std::mem::size_of_val(host);
        copies.insert(key, copy.clone());
        Ok(copy)
    }

    /// Bytes uploaded so far.
    pub fn bytes(&self) -> usize {
        *self.bytes.lock().expect("resident bytes poisoned")
    }
}
