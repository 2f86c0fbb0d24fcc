//! Host values uploaded on a stream of their own as soon as they are asked for, so a copy that needs nothing the GPU computes overlaps the work queued before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr};

use super::device::{Gpu, driver_err as err};

/// One key's device buffer: grown to the largest upload, lent until the process stream has queued its last reader.
struct Slot {
    buf: CudaSlice<f32>,
    /// Recorded on the process stream after the last reader of the previous upload.
    free: Option<CudaEvent>,
    lent: bool,
}

/// The upload stream and each key's buffer.
pub(crate) struct Ahead {
    stream: Arc<CudaStream>,
    slots: Mutex<HashMap<u64, Slot>>,
}

impl Ahead {
    pub(crate) fn new(stream: Arc<CudaStream>) -> Ahead {
        Ahead {
            stream,
            slots: Mutex::new(HashMap::new()),
        }
    }
}

const NO_TIMING: Option<CUevent_flags> = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);

impl Gpu {
    /// Copies `v` into key `key`'s buffer on the upload stream now, after that buffer's last reader; the process stream waits for the copy before anything queued after this.
    ///
    /// # Safety
    /// The returned slice aliases the key's buffer: it must never be freed (leak it), and `ahead_done(key)` must follow once the last work reading it is queued.
    pub unsafe fn upload_ahead(&self, key: u64, v: &[f32]) -> Result<CudaSlice<f32>, String> {
        if self.capturing() {
            return Err("an upload ahead while the stream is captured".into());
        }
        let s = &self.ahead.stream;
        let mut slots = self.ahead.slots.lock().unwrap_or_else(|e| e.into_inner());
        let len = v.len().max(1);
        let slot = match slots.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Slot {
                // SAFETY: every value read is copied in below first.
                buf: unsafe { s.alloc::<f32>(len.next_power_of_two()) }.map_err(err("alloc"))?,
                free: None,
                lent: false,
            }),
        };
        if slot.lent {
            return Err(format!("upload ahead {key} is still lent"));
        }
        if let Some(free) = slot.free.take() {
            s.wait(&free).map_err(err("waiting for a buffer's readers"))?;
        }
        if slot.buf.len() < len {
            // SAFETY: as above; the old buffer is freed on the upload stream after the wait for its readers.
            slot.buf = unsafe { s.alloc::<f32>(len.next_power_of_two()) }.map_err(err("alloc"))?;
        }
        if !v.is_empty() {
            s.memcpy_htod(v, &mut slot.buf.slice_mut(..v.len()))
                .map_err(err("upload"))?;
        }
        let done = s.record_event(NO_TIMING).map_err(err("upload end"))?;
        self.stream.wait(&done).map_err(err("waiting for an upload"))?;
        slot.lent = true;
        let (ptr, _record) = slot.buf.device_ptr(s);
        // SAFETY: `ptr` heads at least `len` values that live in the slot until the process is done; the caller never frees the alias.
        Ok(unsafe { self.stream.upgrade_device_ptr(ptr, len) })
    }

    /// Ends key `key`'s loan: its next upload waits for the work the process stream has queued so far.
    pub fn ahead_done(&self, key: u64) -> Result<(), String> {
        let mut slots = self.ahead.slots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = slots.get_mut(&key) else {
            return Err(format!("no upload ahead {key}"));
        };
        slot.free = Some(self.stream.record_event(NO_TIMING).map_err(err("readers' end"))?);
        slot.lent = false;
        Ok(())
    }
}
