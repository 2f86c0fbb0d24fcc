//! Device values read back to the host through one page-locked buffer, so the copies run at DMA speed and a read-back waits for the stream once.

use std::sync::Mutex;

use cudarc::driver::{CudaView, DevicePtr, DeviceRepr, PinnedHostSlice, result};

use super::device::Gpu;

/// The page-locked bytes read-backs land in, grown to the largest read-back so far.
#[derive(Default)]
pub(crate) struct Landing(Mutex<Option<PinnedHostSlice<u8>>>);

impl Gpu {
    /// The values of each of `srcs` on the host, copied after the work queued before them, with one wait for the stream.
    pub fn read_back<T: DeviceRepr + Copy>(&self, srcs: &[CudaView<'_, T>]) -> Result<Vec<Vec<T>>, String> {
        let err = |what: &'static str| move |e| format!("CUDA {what}: {e:?}");
        let size = std::mem::size_of::<T>();
        let bytes = srcs.iter().map(|s| s.len() * size).sum::<usize>();
        let mut landing = self.landing.0.lock().expect("read-back buffer poisoned");
        if landing.as_ref().is_none_or(|p| p.len() < bytes) {
            *landing = None;
            // SAFETY: the bytes are only read after copies into them have completed (the stream is synchronised below).
            let fresh = unsafe { self.ctx.alloc_pinned::<u8>(bytes.next_power_of_two().max(1 << 16)) };
            *landing = Some(fresh.map_err(err("page-locked allocation"))?);
        }
        let base = landing
            .as_mut()
            .expect("a landing buffer")
            .as_mut_ptr()
            .map_err(err("read-back buffer"))?;
        self.ctx.bind_to_thread().map_err(err("binding the context"))?;
        let mut at = 0;
        for s in srcs.iter().filter(|s| !s.is_empty()) {
            let (ptr, _record) = s.device_ptr(&self.stream);
            // SAFETY: `base + at` starts `s.len()` values inside the buffer sized above, aligned for T (page-aligned base, offsets whole values).
            let dst = unsafe { std::slice::from_raw_parts_mut(base.add(at).cast::<T>(), s.len()) };
            // SAFETY: `dst` stays alive and untouched until the stream is synchronised below.
            unsafe { result::memcpy_dtoh_async(dst, ptr, self.stream.cu_stream()) }.map_err(err("copying back"))?;
            at += s.len() * size;
        }
        self.stream.synchronize().map_err(err("waiting for a read-back"))?;
        let mut at = 0;
        let out = srcs
            .iter()
            .map(|s| {
                // SAFETY: the copy into these bytes completed at the synchronisation above.
                let v = unsafe { std::slice::from_raw_parts(base.add(at).cast::<T>(), s.len()) }.to_vec();
                at += s.len() * size;
                v
            })
            .collect();
        Ok(out)
    }
}
