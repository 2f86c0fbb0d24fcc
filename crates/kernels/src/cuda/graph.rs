//! Stream capture: the work a closure queues on the process stream, recorded once as a CUDA graph and replayed by one launch.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, ThreadId};

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaStream, DriverError};

use super::device::Gpu;
use super::launch::programmatic;

/// A recorded sequence of the stream's work; replaying it reads and writes the same device addresses as the capture did.
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    stream: Arc<CudaStream>,
    programmatic: usize,
}

// SAFETY: a graph is only launched onto the process's one stream, and its owner serialises launches behind a lock.
unsafe impl Send for Graph {}
// SAFETY: as above; `launch` takes `&self` but the driver call itself is thread-safe.
unsafe impl Sync for Graph {}

impl Graph {
    /// Queues the recorded work on the stream it was captured from.
    pub fn launch(&self) -> Result<(), String> {
        let launched = self.stream.context().bind_to_thread().and_then(|()| {
            // SAFETY: `exec` is a live instantiation and the stream belongs to the context just bound.
            unsafe { result::graph::launch(self.exec, self.stream.cu_stream()) }
        });
        launched.map_err(|e| format!("CUDA graph launch: {e:?}"))
    }

    /// Kernel-to-kernel edges that let the later kernel start its blocks before the earlier one ends.
    pub fn programmatic_edges(&self) -> usize {
        self.programmatic
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let ctx = self.stream.context();
        // SAFETY: both handles were created by `capture` and are destroyed once, here.
        unsafe {
            ctx.record_err(result::graph::exec_destroy(self.exec));
            ctx.record_err(result::graph::destroy(self.graph));
        }
    }
}

/// Captures in this process that failed while chained, and up to four distinct reasons.
static CHAINING: Mutex<(u64, Vec<String>)> = Mutex::new((0, Vec::new()));

/// Captures that failed while chained so far, and up to four distinct reasons.
pub fn chaining() -> (u64, Vec<String>) {
    CHAINING.lock().expect("chaining record poisoned").clone()
}

/// The programmatic edges of `graph`; safety: `graph` must be a live graph.
unsafe fn programmatic_edges(graph: sys::CUgraph) -> Result<usize, DriverError> {
    use std::ptr::null_mut;
    let mut n = 0usize;
    // SAFETY: with null arrays the call only counts the edges.
    unsafe { sys::cuGraphGetEdges_v2(graph, null_mut(), null_mut(), null_mut(), &mut n) }.result()?;
    let (mut from, mut to): (Vec<sys::CUgraphNode>, Vec<sys::CUgraphNode>) = (vec![null_mut(); n], vec![null_mut(); n]);
    // SAFETY: zeroed edge data is the plain annotation.
    let mut data: Vec<sys::CUgraphEdgeData> = vec![unsafe { std::mem::zeroed() }; n];
    // SAFETY: each array holds `n` entries, the count the driver just gave.
    unsafe { sys::cuGraphGetEdges_v2(graph, from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut n) }
        .result()?;
    let chained = sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8;
    Ok(data[..n].iter().filter(|d| d.type_ == chained).count())
}

/// Ends a capture left open by a panic, so the stream runs eagerly again; marks the stream as no longer capturing.
struct Open<'a>(&'a Gpu, bool, bool);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if self.1 {
            let flags = CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
            drop(self.0.stream.end_capture(flags));
            if self.2 {
                self.0.unchain_captures("a launch failed while recording".into());
            }
        }
        self.0.capturing.store(false, Ordering::Relaxed);
    }
}

/// Who holds the process stream, how deep its turns nest, and the tickets that serve waiting threads first come, first served.
struct TurnState {
    owner: Option<ThreadId>,
    depth: usize,
    next: u64,
    serving: u64,
}

static TURN: (Mutex<TurnState>, Condvar) = (
    Mutex::new(TurnState {
        owner: None,
        depth: 0,
        next: 0,
        serving: 0,
    }),
    Condvar::new(),
);

/// The process stream held for this thread until dropped: work other threads queue waits, so a capture records only this thread's.
pub struct Turn(());

impl Drop for Turn {
    fn drop(&mut self) {
        let mut t = TURN.0.lock().expect("stream turn poisoned");
        t.depth -= 1;
        if t.depth == 0 {
            t.owner = None;
            t.serving += 1;
            TURN.1.notify_all();
        }
    }
}

/// Holds the process stream for this thread (again, if it already does), after every thread that asked for it first.
pub fn turn() -> Turn {
    let me = thread::current().id();
    let mut t = TURN.0.lock().expect("stream turn poisoned");
    if t.owner != Some(me) {
        let ticket = t.next;
        t.next += 1;
        while t.owner.is_some() || t.serving != ticket {
            t = TURN.1.wait(t).expect("stream turn poisoned");
        }
        t.owner = Some(me);
    }
    t.depth += 1;
    Turn(())
}

/// Whether this thread holds the process stream.
pub fn holds_turn() -> bool {
    TURN.0.lock().expect("stream turn poisoned").owner == Some(thread::current().id())
}

impl Gpu {
    /// Whether a kernel launched now chains programmatically to the one before it.
    pub(crate) fn chains(&self) -> bool {
        programmatic(self.arch)
            && (!self.capturing.load(Ordering::Relaxed) || self.chain_captures.load(Ordering::Relaxed))
    }

    /// Whether captures record programmatic chains (until one fails with them).
    pub fn chains_captures(&self) -> bool {
        programmatic(self.arch) && self.chain_captures.load(Ordering::Relaxed)
    }

    /// Records plain edges in later captures, because a chained one failed for `why`.
    fn unchain_captures(&self, why: String) {
        self.chain_captures.store(false, Ordering::Relaxed);
        let mut c = CHAINING.lock().expect("chaining record poisoned");
        c.0 += 1;
        if c.1.len() < 4 && !c.1.contains(&why) {
            c.1.push(why);
        }
    }

    /// Whether this process's stream is being captured into a graph now.
    pub fn capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    /// Records, without running, the work `f` queues on the stream; `f` must queue no host copies or waits.
    pub fn capture<R>(&self, f: impl FnOnce() -> R) -> Result<(Graph, R), String> {
        let _turn = turn();
        let chained = self.chains_captures();
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream
            .begin_capture(mode)
            .map_err(|e| format!("CUDA capture start: {e:?}"))?;
        self.capturing.store(true, Ordering::Relaxed);
        let mut open = Open(self, true, chained);
        let r = f();
        open.1 = false;
        let built = (|| {
            self.ctx.bind_to_thread()?;
            // SAFETY: this thread began the capture on this stream above.
            let graph = unsafe { result::stream::end_capture(self.stream.cu_stream()) }?;
            if graph.is_null() {
                return Ok(None);
            }
            let flags = CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
            // SAFETY: `graph` is the live graph the capture returned; it is destroyed here if it cannot be instantiated.
            let made = unsafe { programmatic_edges(graph) }
                .and_then(|edges| Ok((unsafe { result::graph::instantiate(graph, flags) }?, edges)));
            match made {
                Ok((exec, programmatic)) => Ok(Some((graph, exec, programmatic))),
                Err(e) => {
                    // SAFETY: the graph is dropped here and nowhere else.
                    self.ctx.record_err(unsafe { result::graph::destroy(graph) });
                    Err(e)
                }
            }
        })();
        match built {
            Ok(Some((graph, exec, programmatic))) => {
                let stream = self.stream.clone();
                Ok((
                    Graph {
                        graph,
                        exec,
                        stream,
                        programmatic,
                    },
                    r,
                ))
            }
            Ok(None) => Err("CUDA capture recorded no work".into()),
            Err(e) => {
                let why = format!("CUDA capture: {e:?}");
                if chained {
                    self.unchain_captures(why.clone());
                }
                Err(why)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Keeps this module's turn tests from running beside each other.
    static ALONE: Mutex<()> = Mutex::new(());

    /// Threads holding a ticket for the turn and not holding it yet.
    fn waiters() -> u64 {
        let t = TURN.0.lock().unwrap();
        t.next - t.serving - u64::from(t.owner.is_some())
    }

    #[test]
    fn a_waiting_thread_is_served_before_the_holder_takes_the_turn_again() {
        let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = turn();
        let waiter = {
            let order = order.clone();
            thread::spawn(move || {
                let _t = turn();
                order.lock().unwrap().push("waiter");
            })
        };
        while waiters() == 0 {
            thread::yield_now();
        }
        drop(first);
        let again = turn();
        order.lock().unwrap().push("holder again");
        drop(again);
        waiter.join().unwrap();
        assert_eq!(
            *order.lock().unwrap(),
            ["waiter", "holder again"],
            "the holder took the turn back past a waiting thread"
        );
    }

    #[test]
    fn turns_nest_on_one_thread_and_exclude_the_others() {
        let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
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
