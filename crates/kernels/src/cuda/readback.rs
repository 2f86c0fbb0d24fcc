//! Device values read back to the host through one page-locked buffer, so the copies run at DMA speed and a read-back waits for the stream once.

use std::sync::{Mutex, OnceLock};

use cudarc::driver::{CudaView, DevicePtr, DeviceRepr, PinnedHostSlice, sys};

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
            // Cached, not write-combined: the host reads these bytes, and reads of write-combined memory bypass the caches.
            let len = bytes.next_power_of_two().max(1 << 16);
            // SAFETY: the bytes are only read after copies into them have completed (the stream is synchronised below).
            let fresh = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len, 0) };
            *landing = Some(fresh.map_err(err("page-locked allocation"))?);
        }
        let base = landing
            .as_mut()
            .expect("a landing buffer")
            .as_mut_ptr()
            .map_err(err("read-back buffer"))?;
        self.ctx.bind_to_thread().map_err(err("binding the context"))?;
        let (mut dsts, mut ptrs, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 0;
        for s in srcs.iter().filter(|s| !s.is_empty()) {
            let (ptr, _record) = s.device_ptr(&self.stream);
            // SAFETY: `base + at` starts `s.len()` values inside the buffer sized above, aligned for T (page-aligned base, offsets whole values).
            dsts.push(unsafe { base.add(at) } as sys::CUdeviceptr);
            ptrs.push(ptr);
            sizes.push(s.len() * size);
            at += s.len() * size;
        }
        // SAFETY: each destination is `sizes[i]` bytes of the page-locked buffer, untouched until the stream is synchronised below, and each source as many bytes of a live device buffer.
        if !(dsts.len() > 1 && unsafe { self.copy_batch(&mut dsts, &mut ptrs, &mut sizes) }) {
            for ((&dst, &ptr), &n) in dsts.iter().zip(&ptrs).zip(&sizes) {
                // SAFETY: as above.
                unsafe { sys::cuMemcpyDtoHAsync_v2(dst as *mut std::ffi::c_void, ptr, n, self.stream.cu_stream()) }
                    .result()
                    .map_err(err("copying back"))?;
            }
        }
        self.mark(|| format!("{} read-back copies", srcs.len()));
        self.stream.synchronize().map_err(err("waiting for a read-back"))?;
        self.mark(|| "read-back waited".into());
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
        self.mark(|| "read-back copied out".into());
        Ok(out)
    }

    /// Queues device-to-host copies as one batch where the driver has batches (CUDA 13); false, queuing nothing, where it has not.
    ///
    /// # Safety
    /// Each `dsts[i]` must be `sizes[i]` writable page-locked bytes and each `srcs[i]` as many readable device bytes, both live until the stream reaches the copies.
    unsafe fn copy_batch(
        &self,
        dsts: &mut [sys::CUdeviceptr],
        srcs: &mut [sys::CUdeviceptr],
        sizes: &mut [usize],
    ) -> bool {
        static BATCHES: OnceLock<bool> = OnceLock::new();
        let batches = *BATCHES.get_or_init(|| {
            let mut v = 0;
            // SAFETY: `v` receives the driver's version.
            let ok = unsafe { sys::cuDriverGetVersion(&mut v) }.result().is_ok();
            ok && v >= 13000
        });
        if !batches {
            return false;
        }
        let device = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.ordinal as i32,
        };
        let host = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        };
        let mut attrs = [sys::CUmemcpyAttributes {
            srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
            srcLocHint: device,
            dstLocHint: host,
            flags: 0,
        }];
        let mut first = [0usize];
        // SAFETY: the three arrays hold `dsts.len()` copies, attribute 0 covers them all, and the caller vouches for the bytes.
        let r = unsafe {
            sys::cuMemcpyBatchAsync_v2(
                dsts.as_mut_ptr(),
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                dsts.len(),
                attrs.as_mut_ptr(),
                first.as_mut_ptr(),
                1,
                self.stream.cu_stream(),
            )
        };
        r.result().is_ok()
    }
}
