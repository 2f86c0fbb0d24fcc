//! Persistent worker threads for splitting one GEMM's columns, so a call wakes parked threads instead of spawning.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Counts finished parts; the caller waits on it before its borrows end.
struct Latch {
    left: Mutex<usize>,
    done: Condvar,
    panicked: AtomicBool,
}

impl Latch {
    fn finish(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        *left -= 1;
        if *left == 0 {
            self.done.notify_all();
        }
    }

    fn wait(&self) {
        // The other parts usually end within microseconds of this one; sleeping on the condvar costs a wake-up.
        let start = Instant::now();
        while start.elapsed() < SPIN {
            if *self.left.lock().unwrap_or_else(|e| e.into_inner()) == 0 {
                return;
            }
            std::thread::yield_now();
        }
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = self.done.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// One part offered to the workers: whoever takes it first runs it, a worker or the caller once its own part is done.
struct Claim {
    taken: AtomicBool,
    run: *const (dyn Fn() + Sync),
    latch: *const Latch,
}

// SAFETY: the pointees are Sync; a worker dereferences them only after taking the claim, and the submitter waits on the latch for every part a worker took.
unsafe impl Send for Claim {}
// SAFETY: as above; `taken` is the only field written after the claim is made.
unsafe impl Sync for Claim {}

impl Claim {
    /// Whether this call took the part (only the first does).
    fn take(&self) -> bool {
        !self.taken.swap(true, Ordering::AcqRel)
    }
}

/// A claim as a worker receives it.
struct Task(Arc<Claim>);

/// Workers that take parts from one queue; they end when the pool is dropped.
struct Pool {
    tx: Mutex<Sender<Task>>,
    rx: Arc<Mutex<Receiver<Task>>>,
    workers: Mutex<usize>,
}

impl Pool {
    fn new() -> Pool {
        let (tx, rx) = channel();
        Pool {
            tx: Mutex::new(tx),
            rx: Arc::new(Mutex::new(rx)),
            workers: Mutex::new(0),
        }
    }
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::new)
}

/// How long a worker polls for the next part, and the caller for the last part to end, before sleeping (yielding between polls).
const SPIN: Duration = Duration::from_micros(50);

/// The next task, polled for `SPIN` (a forward pass launches kernels back to back), then waited for; `None` once the pool is gone.
fn next_task(rx: &Receiver<Task>) -> Option<Task> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(task) => return Some(task),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if start.elapsed() < SPIN => std::thread::yield_now(),
            Err(TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

fn worker(rx: Arc<Mutex<Receiver<Task>>>) {
    loop {
        let task = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            match next_task(&rx) {
                Some(task) => task,
                None => return,
            }
        };
        if !task.0.take() {
            // The caller ran this part itself; its borrows may be gone, so nothing behind the claim is read.
            continue;
        }
        // SAFETY: the submitter keeps both pointees alive until the latch counts this part.
        let (run, latch) = unsafe { (&*task.0.run, &*task.0.latch) };
        if catch_unwind(AssertUnwindSafe(run)).is_err() {
            latch.panicked.store(true, Ordering::SeqCst);
        }
        latch.finish();
    }
}

/// Runs every part once, the first on the calling thread and the rest on pool workers (or on the caller, where no worker has taken one by the time its own part ends); returns when all finished.
pub fn run_parts(parts: &[&(dyn Fn() + Sync)]) {
    run_parts_on(pool(), parts);
}

/// `run_parts` on the workers of `pool`.
fn run_parts_on(pool: &Pool, parts: &[&(dyn Fn() + Sync)]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        first();
        return;
    }
    {
        let mut workers = pool.workers.lock().unwrap_or_else(|e| e.into_inner());
        while *workers < rest.len() {
            let rx = Arc::clone(&pool.rx);
            std::thread::Builder::new()
                .name("tensorfold-gemm".into())
                .spawn(move || worker(rx))
                .expect("spawning a GEMM worker thread");
            *workers += 1;
        }
    }
    let latch = Latch {
        left: Mutex::new(rest.len()),
        done: Condvar::new(),
        panicked: AtomicBool::new(false),
    };
    let claims: Vec<Arc<Claim>> = rest
        .iter()
        .map(|part| {
            // SAFETY: erases the borrow's lifetime; a worker uses it only after taking the claim, and `latch.wait()` below waits for such parts.
            let run: *const (dyn Fn() + Sync + 'static) =
                unsafe { std::mem::transmute(*part as *const (dyn Fn() + Sync)) };
            Arc::new(Claim {
                taken: AtomicBool::new(false),
                run,
                latch: &latch,
            })
        })
        .collect();
    {
        let tx = pool.tx.lock().unwrap_or_else(|e| e.into_inner());
        for claim in &claims {
            tx.send(Task(Arc::clone(claim))).expect("the GEMM pool is alive");
        }
    }
    let mine = catch_unwind(AssertUnwindSafe(first));
    // Parts no worker has taken yet run here (or, after a panic, are dropped), so a worker without a core does not hold up the call.
    for (claim, part) in claims.iter().zip(rest) {
        if claim.take() {
            if mine.is_ok() && catch_unwind(AssertUnwindSafe(part)).is_err() {
                latch.panicked.store(true, Ordering::SeqCst);
            }
            latch.finish();
        }
    }
    latch.wait();
    if let Err(e) = mine {
        resume_unwind(e);
    }
    if latch.panicked.load(Ordering::SeqCst) {
        panic!("a part of a split GEMM panicked");
    }
}

/// Runs `f(i, chunk)` for every chunk, the first on the calling thread and the rest on pool workers.
pub fn run_chunks<T: Send>(chunks: Vec<&mut [T]>, f: impl Fn(usize, &mut [T]) + Sync) {
    let chunks: Vec<Mutex<&mut [T]>> = chunks.into_iter().map(Mutex::new).collect();
    let parts: Vec<Box<dyn Fn() + Sync + '_>> = chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let f = &f;
            Box::new(move || f(i, &mut chunk.lock().expect("one part per chunk"))) as Box<dyn Fn() + Sync>
        })
        .collect();
    run_parts(&parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_part_runs_once_and_panics_propagate() {
        let hits: Vec<AtomicUsize> = (0..5).map(|_| AtomicUsize::new(0)).collect();
        for _ in 0..50 {
            let parts: Vec<Box<dyn Fn() + Sync>> = (0..5)
                .map(|i| {
                    let hits = &hits;
                    Box::new(move || {
                        hits[i].fetch_add(1, Ordering::SeqCst);
                    }) as Box<dyn Fn() + Sync>
                })
                .collect();
            let refs: Vec<&(dyn Fn() + Sync)> = parts.iter().map(|p| p.as_ref()).collect();
            run_parts(&refs);
        }
        assert!(hits.iter().all(|h| h.load(Ordering::SeqCst) == 50));
        let bad = || panic!("planted");
        let fine = || {};
        let parts: [&(dyn Fn() + Sync); 2] = [&fine, &bad];
        assert!(catch_unwind(AssertUnwindSafe(|| run_parts(&parts))).is_err());
    }

    #[test]
    fn a_part_no_worker_takes_runs_on_the_caller() {
        let pool = Pool::new();
        let (started, release) = (AtomicBool::new(false), AtomicBool::new(false));
        let ran_on = Mutex::new(None);
        std::thread::scope(|s| {
            // The pool's only worker is held by a part that ends once released (or after 5 s).
            s.spawn(|| {
                let hold = || {
                    started.store(true, Ordering::SeqCst);
                    let t = Instant::now();
                    while !release.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                };
                // The caller's own part waits until the worker has taken `hold`, so the caller cannot take it.
                let first = || {
                    while !started.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                };
                run_parts_on(&pool, &[&first, &hold]);
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let mine = || {};
            let other = || *ran_on.lock().unwrap() = Some(std::thread::current().id());
            run_parts_on(&pool, &[&mine, &other]);
            release.store(true, Ordering::SeqCst);
        });
        assert_eq!(*ran_on.lock().unwrap(), Some(std::thread::current().id()));
    }
}
