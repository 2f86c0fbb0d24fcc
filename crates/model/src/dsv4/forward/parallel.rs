//! Several ranks serving one model without splitting a reduction: ranks own whole attention heads and whole routed experts, and their outputs are gathered, so a rank count never changes a bit.

use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use tensorfold_kernels::sparse_attn::AttnShape;

use super::collective::{Collective, ThreadCollective};
use super::device::Device;
use super::{Dsv4Model, Pass, moe, ops};
use crate::dsv4::weights::Moe;

/// The attention core of one layer, for every head: rank `r` attends heads `r*H/N..(r+1)*H/N`.
struct AttnJob {
    q: Vec<f32>,
    lists: Vec<i32>,
    table: Vec<f32>,
    sink: Vec<f32>,
    positions: Vec<i32>,
    freqs: Vec<f32>,
    shape: AttnShape,
}

/// One MoE layer's routed experts: rank `r` computes experts `r*E/N..(r+1)*E/N`, each whole.
struct MoeJob {
    block: usize,
    x: Vec<f32>,
    idx: Vec<i32>,
    weights: Vec<f32>,
}

enum Job {
    Attn(Arc<AttnJob>),
    Moe(Arc<MoeJob>),
}

/// Ranks 1..N as threads of this process, each on its own device, following rank 0's layers.
pub struct RankGroup {
    comm: ThreadCollective,
    jobs: Vec<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RankGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RankGroup({} ranks)", self.ranks())
    }
}

impl Drop for RankGroup {
    fn drop(&mut self) {
        self.jobs.clear();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
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
            let (tx, rx) = channel::<Job>();
            let model = Dsv4Model::new(model.config.clone(), model.weights.clone(), model.semantics);
            jobs.push(tx);
            let name = format!("tensorfold-rank-{}", c.rank());
            let worker = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let mine = run(&model, &device, &c, &job);
                        c.all_gather(&mine);
                    }
                })
                .map_err(|e| format!("cannot start rank thread: {e}"))?;
            workers.push(worker);
        }
        Ok(Arc::new(RankGroup { comm, jobs, workers }))
    }

    pub fn ranks(&self) -> usize {
        self.comm.ranks()
    }

    /// Rank 0's share of `job` computed here, every other rank's gathered, in rank order.
    fn dispatch(&self, pass: &Pass<'_>, job: Job) -> Vec<Vec<f32>> {
        let share = |j: &Job| match j {
            Job::Attn(a) => Job::Attn(a.clone()),
            Job::Moe(m) => Job::Moe(m.clone()),
        };
        for tx in &self.jobs {
            tx.send(share(&job)).expect("a rank thread stopped");
        }
        let mine = run(pass.model, &pass.device, &self.comm, &job);
        self.comm.all_gather(&mine)
    }

    /// Sparse attention with the sink, then inverse RoPE, over every head: `[rows, H * hd]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attend(
        &self,
        pass: &Pass<'_>,
        q: &[f32],
        lists: &[i32],
        table: &[f32],
        sink: &[f32],
        freqs: &[f32],
        shape: AttnShape,
    ) -> Vec<f32> {
        let job = Arc::new(AttnJob {
            q: q.to_vec(),
            lists: lists.to_vec(),
            table: table.to_vec(),
            sink: sink.to_vec(),
            positions: pass.positions.clone(),
            freqs: freqs.to_vec(),
            shape,
        });
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
        let job = Arc::new(MoeJob {
            block: moe_block(pass.model, w),
            x: x.to_vec(),
            idx: idx.to_vec(),
            weights: weights.to_vec(),
        });
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

/// The experts rank `rank` of `ranks` owns.
fn owned(experts: usize, ranks: usize, rank: usize) -> std::ops::Range<usize> {
    let per = experts / ranks;
    rank * per..(rank + 1) * per
}

/// Which block's MoE `w` is: a main layer's index, or the layer count plus an MTP layer's index.
fn moe_block(model: &Dsv4Model, w: &Moe) -> usize {
    let main = model.weights.layers.iter().map(|b| &b.ffn);
    let mtp = model.weights.mtp.iter().map(|m| &m.block.ffn);
    main.chain(mtp)
        .position(|m| std::ptr::eq(m, w))
        .expect("the MoE belongs to the model")
}

fn moe_of(model: &Dsv4Model, block: usize) -> &Moe {
    let layers = &model.weights.layers;
    match layers.get(block) {
        Some(b) => &b.ffn,
        None => &model.weights.mtp[block - layers.len()].block.ffn,
    }
}

/// This rank's share of `job`.
fn run(model: &Dsv4Model, device: &Device, comm: &dyn Collective, job: &Job) -> Vec<f32> {
    let (rank, ranks) = (comm.rank(), comm.ranks());
    match job {
        Job::Attn(a) => {
            let (rows, h, hd) = (a.positions.len(), a.shape.num_heads, a.shape.head_dim);
            let heads = h / ranks;
            let (from, width) = (rank * heads * hd, heads * hd);
            let q: Vec<f32> = (0..rows)
                .flat_map(|r| a.q[r * h * hd + from..r * h * hd + from + width].iter().copied())
                .collect();
            let sink = &a.sink[rank * heads..(rank + 1) * heads];
            let shape = AttnShape {
                num_heads: heads,
                ..a.shape
            };
            let mut o = device.zeros(rows * width);
            let (q, table) = (device.put(q), device.put_slice(&a.table));
            ops::sparse_attn(device, &q, &a.lists, &table, sink, shape, &mut o);
            ops::rope(device, &mut o, &device.put_slice(&a.positions), hd, &a.freqs, true);
            o.into_vec(device)
        }
        Job::Moe(m) => {
            let w = moe_of(model, m.block);
            let pass = Pass::new(device.clone(), Vec::new(), Vec::new(), Vec::new(), model, None);
            let d = model.config.hidden_size;
            let k = m.idx.len() / (m.x.len() / d).max(1);
            let x = device.put_slice(&m.x);
            let mut out = Vec::new();
            for e in owned(w.experts.len(), ranks, rank) {
                if let Some(y) = moe::expert_rows(&pass, &w.experts[e], e, &x, &m.idx, &m.weights, k) {
                    out.extend_from_slice(&y.into_vec(device));
                }
            }
            out
        }
    }
}
