//! The engine on its own thread: submit, cancel and stats from any thread; events arrive through each request's sink.

use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::engine::{Engine, EngineStats};
use crate::request::{GenerateParams, RequestId, Sink};

enum Command {
    Submit {
        prompt: Vec<u32>,
        params: GenerateParams,
        sink: Sink,
        reply: Sender<Result<RequestId, String>>,
    },
    Cancel(RequestId),
    Shutdown,
}

/// A cloneable handle to an engine running on its own thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
    stats: Arc<Mutex<EngineStats>>,
    vocab_size: usize,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl EngineHandle {
    /// Starts `engine`'s step loop on a new thread.
    pub fn spawn(engine: Engine) -> EngineHandle {
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(Mutex::new(engine.stats()));
        let vocab_size = engine.vocab_size();
        let shared = stats.clone();
        let thread = std::thread::Builder::new()
            .name("tensorfold-engine".into())
            .spawn(move || run(engine, rx, shared))
            .expect("spawning the engine thread");
        EngineHandle {
            tx,
            stats,
            vocab_size,
            thread: Arc::new(Mutex::new(Some(thread))),
        }
    }

    /// Queues a request; its events go to `sink`. Fails with the reason when it can never run.
    pub fn submit(&self, prompt: Vec<u32>, params: GenerateParams, sink: Sink) -> Result<RequestId, String> {
        let (reply, answer) = mpsc::channel();
        self.tx
            .send(Command::Submit {
                prompt,
                params,
                sink,
                reply,
            })
            .map_err(|_| "the engine has stopped".to_string())?;
        answer.recv().map_err(|_| "the engine has stopped".to_string())?
    }

    /// Cancels a request; it finishes with `abort` and its state is freed before the next round.
    pub fn cancel(&self, id: RequestId) {
        let _ = self.tx.send(Command::Cancel(id));
    }

    /// Counters as of the last round.
    pub fn stats(&self) -> EngineStats {
        *self.stats.lock().expect("stats lock")
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Stops the loop after the current round and waits for the thread.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
        if let Some(t) = self.thread.lock().expect("thread lock").take() {
            let _ = t.join();
        }
    }
}

/// Applies one command; false on shutdown.
fn apply(engine: &mut Engine, cmd: Command) -> bool {
    match cmd {
        Command::Submit {
            prompt,
            params,
            sink,
            reply,
        } => {
            let _ = reply.send(engine.submit(prompt, params, sink));
        }
        Command::Cancel(id) => engine.abort(id),
        Command::Shutdown => return false,
    }
    true
}

fn run(mut engine: Engine, rx: Receiver<Command>, stats: Arc<Mutex<EngineStats>>) {
    loop {
        if !engine.has_work() {
            let Ok(cmd) = rx.recv() else { return };
            if !apply(&mut engine, cmd) {
                return;
            }
        }
        loop {
            match rx.try_recv() {
                Ok(cmd) => {
                    if !apply(&mut engine, cmd) {
                        return;
                    }
                }
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => break,
            }
        }
        *stats.lock().expect("stats lock") = engine.stats();
        engine.step();
        *stats.lock().expect("stats lock") = engine.stats();
    }
}
