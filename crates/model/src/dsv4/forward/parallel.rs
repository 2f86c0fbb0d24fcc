//! Several ranks serving one model without splitting a reduction: ranks own whole attention heads and whole routed experts, and their outputs are gathered, so a rank count never changes a bit.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use tensorfold_kernels::sparse_attn::AttnShape;

use super::collective::{Collective, ThreadCollective};
use super::device::Device;
pub use super::jobs::owned;
use super::jobs::{AttnJob, Job, MoeJob, moe_block, run};
use super::{Dsv4Model, Pass};
use crate::dsv4::weights::Moe;

/// How rank 0 hands a job to the other ranks.
enum Followers {
    /// Threads of this process, each reading jobs from its channel.
    Threads {
        jobs: Vec<Sender<Arc<Job>>>,
        workers: Vec<JoinHandle<()>>,
    },
    /// Other processes, reached only through the collective: every job is broadcast from rank 0.
    Remote,
}

/// Ranks 1..N following rank 0's layers: threads of this process or other processes joined by a collective.
pub struct RankGroup {
    comm: Box<dyn Collective>,
    followers: Followers,
    /// What keeps the other ranks alive (their processes), dropped after they were told to stop.
    guard: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for RankGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RankGroup({} ranks)", self.ranks())
    }
}

impl Drop for RankGroup {
    fn drop(&mut self) {
        match &mut self.followers {
            Followers::Threads { jobs, workers } => {
                jobs.clear();
                for w in workers.drain(..) {
                    let _ = w.join();
                }
            }
            Followers::Remote => {
                let comm = &self.comm;
                // A broken group has no one left to tell; its failure was reported where it happened.
                let _ = catch_unwind(AssertUnwindSafe(|| comm.broadcast(&mut Job::Stop.encode(), 0)));
            }
        }
        self.guard.take();
    }
}

/// Why `ranks` cannot serve `model`: it must divide the attention heads and the routed experts.
pub fn check_ranks(model: &Dsv4Model, ranks: usize) -> Result<(), String> {
    let c = &model.config;
    let parts = [
        ("attention heads", c.num_attention_heads),
        ("routed experts", c.n_routed_experts),
    ];
    if ranks == 0 {
        return Err("--tp must be at least 1".into());
    }
    for (what, n) in parts {
        if n % ranks != 0 {
            let ok: Vec<String> = (1..=n).filter(|r| n % r == 0).map(|r| r.to_string()).collect();
            return Err(format!(
                "--tp {ranks} does not divide the model's {n} {what}; use one of {}",
                ok.join(", ")
            ));
        }
    }
    Ok(())
}

impl RankGroup {
    /// Ranks 1..`ranks` as threads, each with its own copy of `model` (weights shared, mapped) and the device `open(rank)` gives; rank 0 is the caller.
    pub fn threads(
        model: &Dsv4Model,
        ranks: usize,
        open: impl Fn(usize) -> Result<Device, String>,
    ) -> Result<Arc<RankGroup>, String> {
        check_ranks(model, ranks)?;
        let mut comms = ThreadCollective::group(ranks).into_iter();
        let comm = comms.next().expect("rank 0");
        let (mut jobs, mut workers) = (Vec::new(), Vec::new());
        for c in comms {
            let device = open(c.rank())?;
            let (tx, rx) = channel::<Arc<Job>>();
            let mut weights = model.weights.clone();
            weights.keep_share(c.rank(), ranks);
            let model = Dsv4Model::new(model.config.clone(), weights, model.semantics);
            jobs.push(tx);
            let name = format!("tensorfold-rank-{}", c.rank());
            let worker = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let mine = run(&model, &device, &c, &job);
                        c.gather(&mine, 0);
                    }
                })
                .map_err(|e| format!("cannot start rank thread: {e}"))?;
            workers.push(worker);
        }
        Ok(Arc::new(RankGroup {
            comm: Box::new(comm),
            followers: Followers::Threads { jobs, workers },
            guard: None,
        }))
    }

    /// Rank 0 of a group of other processes joined by `comm` (rank 0's end); `guard` is dropped once they were told to stop.
    pub fn leader(comm: Box<dyn Collective>, guard: Option<Box<dyn Send + Sync>>) -> Arc<RankGroup> {
        Arc::new(RankGroup {
            comm,
            followers: Followers::Remote,
            guard,
        })
    }

    /// Why the group stopped working (a rank left), once it has.
    pub fn broken(&self) -> Option<String> {
        self.comm.broken()
    }

    pub fn ranks(&self) -> usize {
        self.comm.ranks()
    }

    /// Rank 0's share of `job` computed here, every other rank's gathered, in rank order.
    fn dispatch(&self, pass: &Pass<'_>, job: Job) -> Vec<Vec<f32>> {
        let job = Arc::new(job);
        match &self.followers {
            Followers::Threads { jobs, .. } => {
                for tx in jobs {
                    tx.send(job.clone()).expect("a rank thread stopped");
                }
            }
            Followers::Remote => self.comm.broadcast(&mut job.encode(), 0),
        }
        let mine = run(pass.model, &pass.device, self.comm.as_ref(), &job);
        self.comm.gather(&mine, 0).expect("rank 0 gathers")
    }

    /// Sparse attention with the sink, then inverse RoPE, over every head: `[rows, H * hd]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attend(
        &self,
        pass: &Pass<'_>,
        block: usize,
        ratio: usize,
        q: &[f32],
        lists: &[i32],
        table: &[f32],
        shape: AttnShape,
    ) -> Vec<f32> {
        let job = AttnJob {
            block,
            ratio,
            q: q.to_vec(),
            lists: lists.to_vec(),
            table: table.to_vec(),
            positions: pass.positions.clone(),
            shape,
        };
        let parts = self.dispatch(pass, Job::Attn(job));
        let (rows, n) = (pass.rows(), self.ranks());
        let width = shape.num_heads / n * shape.head_dim;
        let mut o = vec![0f32; rows * width * n];
        for (r, part) in parts.iter().enumerate() {
            for row in 0..rows {
                let dst = row * width * n + r * width;
                o[dst..dst + width].copy_from_slice(&part[row * width..(row + 1) * width]);
            }
        }
        o
    }

    /// The routed experts' outputs `[rows * k, D]` (slot order), each expert computed whole on its rank.
    pub(crate) fn experts(&self, pass: &Pass<'_>, w: &Moe, x: &[f32], idx: &[i32], weights: &[f32]) -> Vec<f32> {
        let job = MoeJob {
            block: moe_block(pass.model, w),
            x: x.to_vec(),
            idx: idx.to_vec(),
            weights: weights.to_vec(),
        };
        let parts = self.dispatch(pass, Job::Moe(job));
        let d = pass.model.config.hidden_size;
        let mut routed = vec![0f32; idx.len() * d];
        for (r, part) in parts.iter().enumerate() {
            let mut at = 0;
            for e in owned(w.experts.len(), self.ranks(), r) {
                for s in (0..idx.len()).filter(|&s| idx[s] as usize == e) {
                    routed[s * d..(s + 1) * d].copy_from_slice(&part[at * d..(at + 1) * d]);
                    at += 1;
                }
            }
        }
        routed
    }
}

/// Rank `comm.rank()` (not 0) of a group of processes: follows rank 0's jobs on `device` until it closes the group.
pub fn follow(model: &Dsv4Model, device: &Device, comm: &dyn Collective) {
    loop {
        let mut buf = Vec::new();
        comm.broadcast(&mut buf, 0);
        let job = Job::decode(&buf);
        if let Job::Stop = job {
            return;
        }
        let mine = run(model, device, comm, &job);
        comm.gather(&mine, 0);
    }
}
