//! Work queued beside the process stream: a second stream forked from it and joined back later, so independent kernels overlap (as parallel branches in a captured graph).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use super::device::Gpu;

/// A branch's queued work: the process stream waits for it at `join` (or when dropped).
pub struct Branch<'a> {
    gpu: &'a Gpu,
    done: Option<CudaEvent>,
}

/// Sends queued work back to the process stream when the branch's closure returns or unwinds.
struct Back<'a>(&'a Gpu);

impl Drop for Back<'_> {
    fn drop(&mut self) {
        self.0.on_side.store(false, Ordering::Relaxed);
    }
}

fn err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> String {
    move |e| format!("CUDA {what}: {e:?}")
}

impl Gpu {
    /// The stream kernels, copies and allocations go to now: the side stream inside `beside`, else the process stream.
    pub fn work(&self) -> &Arc<CudaStream> {
        if self.on_side.load(Ordering::Relaxed) {
            &self.side
        } else {
            &self.stream
        }
    }

    /// Queues `f`'s work on the side stream after the work queued so far, overlapping what the process stream queues until the branch's `join`; buffers `f` allocates must be dropped inside it, and buffers it writes for later work allocated before it.
    pub fn beside<R>(&self, f: impl FnOnce() -> R) -> Result<(Branch<'_>, R), String> {
        if self.on_side.load(Ordering::Relaxed) {
            return Err("a branch beside the process stream is already open".into());
        }
        let flags = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let fork = self.stream.record_event(flags).map_err(err("fork"))?;
        self.side.wait(&fork).map_err(err("fork"))?;
        self.on_side.store(true, Ordering::Relaxed);
        let r = {
            let _back = Back(self);
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
