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

/// One part to run on a worker: borrowed data whose lifetime `run_parts` guarantees by waiting on the latch.
struct Task {
    run: *const (dyn Fn() + Sync),
    latch: *const Latch,
}

// SAFETY: the pointees are Sync and outlive the task (the submitter waits on the latch before returning).
unsafe impl Send for Task {}

struct Pool {
    tx: Mutex<Sender<Task>>,
    rx: Arc<Mutex<Receiver<Task>>>,
    workers: Mutex<usize>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = channel();
        Pool {
            tx: Mutex::new(tx),
            rx: Arc::new(Mutex::new(rx)),
            workers: Mutex::new(0),
        }
    })
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
        // SAFETY: the submitter keeps both pointees alive until the latch reaches zero.
        let (run, latch) = unsafe { (&*task.run, &*task.latch) };
        if catch_unwind(AssertUnwindSafe(run)).is_err() {
            latch.panicked.store(true, Ordering::SeqCst);
        }
        latch.finish();
    }
}

/// Runs every part once, the first on the calling thread and the rest on pool workers; returns when all finished.
pub fn run_parts(parts: &[&(dyn Fn() + Sync)]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        first();
        return;
    }
    let pool = pool();
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
    {
        let tx = pool.tx.lock().unwrap_or_else(|e| e.into_inner());
        for part in rest {
            // SAFETY: erases the borrow's lifetime; `latch.wait()` below outlives every use.
            let run: *const (dyn Fn() + Sync + 'static) =
                unsafe { std::mem::transmute(*part as *const (dyn Fn() + Sync)) };
            tx.send(Task { run, latch: &latch }).expect("the GEMM pool is alive");
        }
    }
    let mine = catch_unwind(AssertUnwindSafe(first));
    latch.wait();
    if let Err(e) = mine {
        resume_unwind(e);
    }
    if latch.panicked.load(Ordering::SeqCst) {
        panic!("a GEMM worker thread panicked");
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
}
