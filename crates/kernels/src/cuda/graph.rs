//! Stream capture: the work a closure queues on the process stream, recorded once as a CUDA graph and replayed by one launch.

use cudarc::driver::CudaGraph;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};

use super::device::Gpu;

/// A recorded sequence of the stream's work; replaying it reads and writes the same device addresses as the capture did.
pub struct Graph(CudaGraph);

// SAFETY: a graph is only launched onto the process's one stream, and its owner serialises launches behind a lock.
unsafe impl Send for Graph {}
// SAFETY: as above; `launch` takes `&self` but the driver call itself is thread-safe.
unsafe impl Sync for Graph {}

impl Graph {
    /// Queues the recorded work on the stream it was captured from.
    pub fn launch(&self) -> Result<(), String> {
        self.0.launch().map_err(|e| format!("CUDA graph launch: {e:?}"))
    }
}

/// Ends a capture left open by a panic, so the stream runs eagerly again.
struct Open<'a>(&'a Gpu, bool);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if self.1 {
            let flags = CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
            drop(self.0.stream.end_capture(flags));
        }
    }
}

impl Gpu {
    /// Records, without running, the work `f` queues on the stream (this thread's only); `f` must queue no host copies or waits.
    pub fn capture<R>(&self, f: impl FnOnce() -> R) -> Result<(Graph, R), String> {
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream
            .begin_capture(mode)
            .map_err(|e| format!("CUDA capture start: {e:?}"))?;
        let mut open = Open(self, true);
        let r = f();
        open.1 = false;
        let flags = CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
        match self.stream.end_capture(flags) {
            Ok(Some(g)) => Ok((Graph(g), r)),
            Ok(None) => Err("CUDA capture recorded no work".into()),
            Err(e) => Err(format!("CUDA capture: {e:?}")),
        }
    }
}
