//! Device values read back to the host through one page-locked buffer, so the copies run at DMA speed and a read-back waits for the stream once.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

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

/// Page-locked bytes that a pass's early read-backs land in, and how many of them are taken.
#[derive(Default)]
pub(crate) struct Early(Mutex<(Option<Arc<PinnedHostSlice<u8>>>, usize)>);

/// A read-back queued by `Gpu::land`: where its values arrive once the stream has passed the copy.
pub struct Landed<T> {
    buf: Arc<PinnedHostSlice<u8>>,
    at: usize,
    len: usize,
    kind: PhantomData<T>,
}

impl Gpu {
    /// Queues a copy of `src` to page-locked host memory after the work queued before it; `landed` reads it.
    pub fn land<T: DeviceRepr>(&self, src: &CudaView<'_, T>) -> Result<Landed<T>, String> {
        let err = |what: &'static str| move |e| format!("CUDA {what}: {e:?}");
        let bytes = src.len() * std::mem::size_of::<T>();
        let mut early = self.early.0.lock().expect("early read-back buffer poisoned");
        let room = early.0.as_ref().is_some_and(|b| early.1 + bytes <= b.len());
        if !room {
            let cap = early.0.as_ref().map_or(0, |b| 2 * b.len());
            // SAFETY: the bytes are only read by `landed`, after the stream has passed every copy into them.
            let fresh = unsafe {
                self.ctx
                    .alloc_pinned::<u8>(cap.max(bytes.next_power_of_two()).max(1 << 20))
            };
            *early = (Some(Arc::new(fresh.map_err(err("page-locked allocation"))?)), 0);
        }
        let (buf, at) = (early.0.clone().expect("an early read-back buffer"), early.1);
        early.1 = (at + bytes).next_multiple_of(64);
        if bytes > 0 {
            self.ctx.bind_to_thread().map_err(err("binding the context"))?;
            let (ptr, _record) = src.device_ptr(&self.stream);
            // The host never writes these bytes; the copy engine does, through the address the driver gave.
            let base = buf.as_ptr().map_err(err("read-back buffer"))?.cast_mut();
            // SAFETY: bytes at..at + bytes of the buffer are this read-back's alone until `landed` frees them; T's alignment divides 64.
            let dst = unsafe { std::slice::from_raw_parts_mut(base.add(at).cast::<T>(), src.len()) };
            // SAFETY: the buffer outlives the copy: `landed` waits for the stream before anything reads or frees it.
            unsafe { result::memcpy_dtoh_async(dst, ptr, self.stream.cu_stream()) }.map_err(err("copying back"))?;
        }
        Ok(Landed {
            buf,
            at,
            len: src.len(),
            kind: PhantomData,
        })
    }

    /// The values of early read-backs, after one wait for the stream; the buffer is then free for the next pass's.
    pub fn landed<T: Copy>(&self, tickets: &[Landed<T>]) -> Result<Vec<Vec<T>>, String> {
        self.stream
            .synchronize()
            .map_err(|e| format!("CUDA waiting for read-backs: {e:?}"))?;
        let mut out = Vec::with_capacity(tickets.len());
        for t in tickets {
            let base = t.buf.as_ptr().map_err(|e| format!("CUDA read-back buffer: {e:?}"))?;
            // SAFETY: the copy into these bytes completed at the synchronisation above.
            out.push(unsafe { std::slice::from_raw_parts(base.add(t.at).cast::<T>(), t.len) }.to_vec());
        }
        self.early.0.lock().expect("early read-back buffer poisoned").1 = 0;
        Ok(out)
    }
}
