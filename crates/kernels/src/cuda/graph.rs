//! Stream capture: the work a closure queues on the process stream, recorded once as a CUDA graph and replayed by one launch.

use std::sync::{Condvar, Mutex};
use std::thread::{self, ThreadId};

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

/// The thread holding the process stream and how deep its turns nest.
static TURN: (Mutex<(Option<ThreadId>, usize)>, Condvar) = (Mutex::new((None, 0)), Condvar::new());

/// The process stream held for this thread until dropped: work other threads queue waits, so a capture records only this thread's.
pub struct Turn(());

impl Drop for Turn {
    fn drop(&mut self) {
        let mut t = TURN.0.lock().expect("stream turn poisoned");
        t.1 -= 1;
        if t.1 == 0 {
            t.0 = None;
            TURN.1.notify_all();
        }
    }
}

/// Holds the process stream for this thread (again, if it already does), waiting while another thread holds it.
pub fn turn() -> Turn {
    let me = thread::current().id();
    let mut t = TURN.0.lock().expect("stream turn poisoned");
    while t.0.is_some_and(|owner| owner != me) {
        t = TURN.1.wait(t).expect("stream turn poisoned");
    }
    t.0 = Some(me);
    t.1 += 1;
    Turn(())
}

/// Whether this thread holds the process stream.
pub fn holds_turn() -> bool {
    TURN.0.lock().expect("stream turn poisoned").0 == Some(thread::current().id())
}

impl Gpu {
    /// Records, without running, the work `f` queues on the stream; `f` must queue no host copies or waits.
    pub fn capture<R>(&self, f: impl FnOnce() -> R) -> Result<(Graph, R), String> {
        let _turn = turn();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn turns_nest_on_one_thread_and_exclude_the_others() {
        {
            let outer = turn();
            let inner = turn();
            assert!(holds_turn());
            assert!(
                !thread::spawn(holds_turn).join().unwrap(),
                "another thread sees the turn as its own"
            );
            drop(inner);
            assert!(holds_turn(), "the outer turn still holds");
            drop(outer);
        }
        assert!(!holds_turn());
        let (inside, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (inside, done) = (inside.clone(), done.clone());
                thread::spawn(move || {
                    for _ in 0..200 {
                        let _t = turn();
                        assert!(
                            !inside.swap(true, Ordering::SeqCst),
                            "two threads hold the stream at once"
                        );
                        thread::yield_now();
                        inside.store(false, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
        assert_eq!(done.load(Ordering::SeqCst), 800);
    }
}
