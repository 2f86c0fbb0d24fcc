//! Work queued beside the process stream: a second stream forked from it and joined back later, so independent kernels overlap (as parallel branches in a captured graph).

use std::cell::Cell;
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use super::device::{Gpu, driver_err as err, upload_on};

/// A branch's queued work: the process stream waits for it at `join` (or when dropped).
pub struct Branch<'a> {
    gpu: &'a Gpu,
    done: Option<CudaEvent>,
}

thread_local! {
    /// Whether this thread is queuing a branch's work now (other threads' work stays on the process stream).
    static ON_SIDE: Cell<bool> = const { Cell::new(false) };
}

/// Sends this thread's queued work back to the process stream when the branch's closure returns or unwinds.
struct Back;

impl Drop for Back {
    fn drop(&mut self) {
        ON_SIDE.set(false);
    }
}

impl Gpu {
    /// The stream this thread's kernels, copies and allocations go to now: the side stream inside `beside`, else the process stream.
    pub fn work(&self) -> &Arc<CudaStream> {
        if ON_SIDE.get() { &self.side } else { &self.stream }
    }

    /// A copy of `host` that both streams may read: uploaded on the process stream, and work queued beside it from here on (when this is called inside `beside`) ordered after the copy.
    pub fn upload_shared<T: DeviceRepr + ValidAsZeroBits + Unpin>(&self, host: &[T]) -> Result<CudaSlice<T>, String> {
        let copy = upload_on(&self.stream, host)?;
        if ON_SIDE.get() {
            let flags = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
            let copied = self.stream.record_event(flags).map_err(err("upload"))?;
            self.side.wait(&copied).map_err(err("upload"))?;
        }
        Ok(copy)
    }

    /// Queues `f`'s work on the side stream after the work queued so far, overlapping what the process stream queues until the branch's `join`; buffers `f` allocates must be dropped inside it, and buffers it writes for later work allocated before it.
    pub fn beside<R>(&self, f: impl FnOnce() -> R) -> Result<(Branch<'_>, R), String> {
        if ON_SIDE.get() {
            return Err("a branch beside the process stream is already open".into());
        }
        let flags = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let fork = self.stream.record_event(flags).map_err(err("fork"))?;
        self.side.wait(&fork).map_err(err("fork"))?;
        ON_SIDE.set(true);
        let r = {
            let _back = Back;
            f()
        };
        let done = self.side.record_event(flags).map_err(err("branch end"))?;
        Ok((
            Branch {
                gpu: self,
                done: Some(done),
            },
            r,
        ))
    }
}

impl Branch<'_> {
    /// Makes the process stream wait for the branch's work before anything queued after this.
    pub fn join(mut self) -> Result<(), String> {
        self.wait()
    }

    fn wait(&mut self) -> Result<(), String> {
        match self.done.take() {
            Some(done) => self.gpu.stream.wait(&done).map_err(err("join")),
            None => Ok(()),
        }
    }
}

impl Drop for Branch<'_> {
    fn drop(&mut self) {
        drop(self.wait());
    }
}
