//! The DeepSeek V4 forward pass built from registered kernels: embedding, mHC blocks, final head.

mod act;
mod attention;
mod block;
pub mod collective;
mod compressor;
mod cpu_groups;
pub mod device;
mod front;
mod graph;
mod jobs;
mod linear;
mod moe;
mod mtp;
pub mod nccl;
mod ops;
pub mod parallel;
mod pending;
mod quant;
mod resident;
mod slots;
pub mod socket;
mod table;

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use tensorfold_kernels::rope::{Yarn, inv_freqs};

use self::act::Act;
pub use self::act::readbacks;
use self::device::Device;
use self::parallel::RankGroup;
use super::batch::{Batch, SeqRows};
use super::blocks::BlockLayout;
use super::cache::{Dsv4Cache, SeqCache};
use super::semantics::Semantics;
use super::weights::Dsv4Weights;
use crate::config::dsv4::Dsv4Config;

/// Everything a forward pass needs besides the batch and the cache.
pub struct Dsv4Model {
    pub config: Dsv4Config,
    pub weights: Dsv4Weights,
    pub semantics: Semantics,
    /// Where each layer's window rows, finished entries and boundary tails sit in a cache block.
    pub layout: BlockLayout,
    /// RoPE inverse frequencies of window-only layers (plain) and compressed layers (YaRN).
    rope_main: Vec<f32>,
    rope_compress: Vec<f32>,
}

/// What the layers of one pass share: rows, their positions and sequences, and the device.
pub(crate) struct Pass<'a> {
    pub device: Device,
    pub positions: Vec<i32>,
    pub groups: Vec<SeqRows>,
    pub model: &'a Dsv4Model,
    /// The ranks that share the attention heads and routed experts; `None` on one rank.
    pub ranks: Option<Arc<RankGroup>>,
    /// `positions` and `token_ids` on the device, placed there once per pass.
    pub pos: Act<i32>,
    pub ids: Act<i32>,
    /// Host cache writes waiting for the end of the pass.
    pending: RefCell<Vec<pending::Pending>>,
    /// This pass's number in the process (graphs copy a pass's integers in once).
    pub serial: u64,
}

/// The next pass's number.
fn next_serial() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl<'a> Pass<'a> {
    /// A pass over rows at `positions` with `token_ids`, both placed on `device`.
    pub fn new(
        device: Device,
        positions: Vec<i32>,
        token_ids: Vec<i32>,
        groups: Vec<SeqRows>,
        model: &'a Dsv4Model,
        ranks: Option<Arc<RankGroup>>,
    ) -> Pass<'a> {
        let (pos, ids) = (device.put_slice(&positions), device.put(token_ids));
        Pass {
            device,
            positions,
            groups,
            model,
            ranks,
            pos,
            ids,
            pending: RefCell::default(),
            serial: next_serial(),
        }
    }

    /// A pass over rows at `positions` without row groups or tokens (for rows that touch no sequence state).
    fn shallow(&self, positions: Vec<i32>) -> Pass<'a> {
        Pass::new(
            self.device.clone(),
            positions,
            Vec::new(),
            Vec::new(),
            self.model,
            self.ranks.clone(),
        )
    }

    /// This pass's rows with device positions `pos` and token ids `ids`, touching no sequence state: the fixed inputs of a graph capture.
    fn fixed(&self, pos: Act<i32>, ids: Act<i32>) -> Pass<'a> {
        Pass {
            device: self.device.clone(),
            positions: self.positions.clone(),
            groups: Vec::new(),
            model: self.model,
            ranks: None,
            pos,
            ids,
            pending: RefCell::default(),
            serial: next_serial(),
        }
    }

    pub fn rows(&self) -> usize {
        self.positions.len()
    }

    pub fn eps(&self) -> f32 {
        self.model.config.rms_norm_eps as f32
    }
}

/// The process stream held for a pass on one GPU (ranks' passes share theirs), so its graph captures record only its own work.
fn turn(device: &Device, opts: &ForwardOptions) -> Option<tensorfold_kernels::cuda::Turn> {
    device
        .cuda()
        .filter(|_| opts.ranks.is_none())
        .map(|_| tensorfold_kernels::cuda::turn())
}

/// What a forward pass returns besides the logits of every row.
#[derive(Clone, Debug, Default)]
pub struct ForwardOptions {
    /// Keep every main layer's output streams.
    pub keep_layers: bool,
    /// Compute logits only for these rows (in this order); `None` for every row.
    pub logit_rows: Option<Vec<usize>>,
    /// The ranks sharing the pass; `None` runs it on one.
    pub ranks: Option<Arc<RankGroup>>,
    /// Return each logit row's greedy pick (`Output::picks`) instead of its logits, made where the pass runs.
    pub picks: bool,
}

/// Outputs of one forward pass.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// `[rows, vocab]` f32 logits (none when picks were asked for).
    pub logits: Vec<f32>,
    /// When asked for: each logit row's greedy pick, the lowest id of its largest logit.
    pub picks: Vec<u32>,
    /// When asked for: every main layer's output streams, `[layers][rows, hc, D]`.
    pub layer_streams: Vec<Vec<f32>>,
    /// The last layer's streams `[rows, hc, D]` (the MTP layer's input).
    pub last_streams: Vec<f32>,
}

impl Dsv4Model {
    /// A model over `weights` with `semantics`.
    pub fn new(config: Dsv4Config, weights: Dsv4Weights, semantics: Semantics) -> Dsv4Model {
        let c = &config;
        let rope_main = inv_freqs(c.qk_rope_head_dim, c.rope_theta, None);
        let yarn = Yarn {
            factor: c.rope_scaling.factor,
            original_max_position_embeddings: c.rope_scaling.original_max_position_embeddings as f64,
            beta_fast: c.rope_scaling.beta_fast,
            beta_slow: c.rope_scaling.beta_slow,
        };
        let rope_compress = inv_freqs(c.qk_rope_head_dim, c.compress_rope_theta, Some(yarn));
        let layout = BlockLayout::new(c);
        Dsv4Model {
            config,
            weights,
            semantics,
            layout,
            rope_main,
            rope_compress,
        }
    }

    /// RoPE frequencies for a layer of compress `ratio`.
    pub(crate) fn rope_for(&self, ratio: usize) -> &[f32] {
        if ratio == 0 {
            &self.rope_main
        } else {
            &self.rope_compress
        }
    }

    /// Checks `batch` against each sequence's position (`at`), its blocks (every layer keeps window rows in them) and the vocabulary, and lays out its rows.
    fn pass(
        &self,
        batch: &Batch,
        cache: &mut Dsv4Cache,
        device: Device,
        layers: Range<usize>,
        at: impl Fn(&SeqCache) -> u32,
    ) -> Result<Pass<'_>, String> {
        let c = &self.config;
        let groups = batch.by_seq()?;
        for g in &groups {
            let pos = at(cache.seq_mut(g.seq, c));
            if pos != g.start {
                return Err(format!(
                    "sequence {} is at position {pos}, the batch starts it at {}",
                    g.seq.0, g.start
                ));
            }
            let end = g.start as usize + g.rows.len();
            cache.cover(g.seq, self.layout.window_pos(layers.start, end))?;
        }
        if let Some(&t) = batch.token_ids.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(format!("token id {t} is outside the vocabulary of {}", c.vocab_size));
        }
        Ok(Pass::new(
            device,
            batch.positions.iter().map(|&p| p as i32).collect(),
            batch.token_ids.iter().map(|&t| t as i32).collect(),
            groups,
            self,
            None,
        ))
    }

    /// Runs `batch` through the model, reading and advancing each sequence's state in `cache`; logits for every row.
    pub fn forward(
        &self,
        batch: &Batch,
        cache: &mut Dsv4Cache,
        device: impl Into<Device>,
        keep_layers: bool,
    ) -> Result<Output, String> {
        self.forward_with(
            batch,
            cache,
            device,
            &ForwardOptions {
                keep_layers,
                ..ForwardOptions::default()
            },
        )
    }

    /// Runs `batch` with `opts`: logits only for the rows asked for, layer streams when asked for.
    pub fn forward_with(
        &self,
        batch: &Batch,
        cache: &mut Dsv4Cache,
        device: impl Into<Device>,
        opts: &ForwardOptions,
    ) -> Result<Output, String> {
        let keep_layers = opts.keep_layers;
        let c = &self.config;
        let device = device.into();
        let _turn = turn(&device, opts);
        let mut pass = self.pass(batch, cache, device, 0..c.num_hidden_layers, |seq| seq.len)?;
        pass.ranks = opts.ranks.clone();
        let (rows, d, hc) = (pass.rows(), c.hidden_size, c.hc_mult);
        let dev = &pass.device;
        dev.mark(|| "start".into());
        // [rows, hc, D]: each row's embedding in every stream, one lookup a stream.
        let ids: Vec<i32> = batch
            .token_ids
            .iter()
            .flat_map(|&t| std::iter::repeat_n(t as i32, hc))
            .collect();
        // The streams go straight into the first block's front graph input where it has one.
        let first = self
            .weights
            .layers
            .first()
            .and_then(|w| graph::front_input(&pass, w, rows * hc * d));
        let mut x = first.unwrap_or_else(|| dev.alloc(rows * hc * d));
        ops::embedding(dev, &self.weights.embed.bytes, d, &dev.put(ids), &mut x);
        let mut out = Output::default();
        dev.mark(|| "embedded".into());
        for (layer_idx, w) in self.weights.layers.iter().enumerate() {
            x = block::block(&pass, layer_idx, w, &x, cache);
            if keep_layers {
                out.layer_streams.push(x.to_vec(dev));
            }
        }
        for g in &pass.groups {
            cache.seq_mut(g.seq, c).len += g.rows.len() as u32;
        }
        let logits = self.logits(&pass, &x, &self.weights.hc_head, &self.weights.norm, opts);
        let logits = picked(&pass, logits, opts.picks);
        let (last_streams, values) = read_back(&pass, cache, x, logits);
        pass.device.mark(|| "cache written".into());
        out.last_streams = last_streams;
        out.place(values?, opts.picks);
        Ok(out)
    }

    /// The head over the rows `opts` asks for (every row when it names none), on the pass's device.
    pub(crate) fn logits(
        &self,
        pass: &Pass<'_>,
        x: &Act,
        hc: &super::weights::Hc,
        norm: &[f32],
        opts: &ForwardOptions,
    ) -> Result<Act, String> {
        let Some(rows) = &opts.logit_rows else {
            return Ok(self.head(pass, x, hc, norm));
        };
        let n = self.config.hc_mult * self.config.hidden_size;
        if let Some(&r) = rows.iter().find(|&&r| r >= pass.rows()) {
            return Err(format!("logit row {r} is outside the batch of {} rows", pass.rows()));
        }
        let mut picked = pass.device.zeros(rows.len() * n);
        picked.copy_rows(&pass.device, &(0..rows.len()).collect::<Vec<_>>(), x, rows, n);
        let sub = pass.shallow(rows.iter().map(|&r| pass.positions[r]).collect());
        Ok(self.head(&sub, &picked, hc, norm))
    }

    /// hc_head, the final norm and the vocabulary head: `[rows, hc, D]` streams to `[rows, vocab]` logits.
    pub(crate) fn head(&self, pass: &Pass<'_>, x: &Act, hc: &super::weights::Hc, norm: &[f32]) -> Act {
        let c = &self.config;
        let (rows, d) = (pass.rows(), c.hidden_size);
        let mut y = pass.device.alloc(rows * d);
        let (eps, hc_eps) = (pass.eps(), c.hc_eps as f32);
        ops::hc_head(
            &pass.device,
            x,
            &hc.fn_,
            &hc.base,
            hc.scale[0],
            c.hc_mult,
            d,
            eps,
            hc_eps,
            &mut y,
        );
        let mut yn = pass.device.alloc(rows * d);
        ops::rms_norm(&pass.device, &y, norm, eps, &mut yn);
        let logits = linear::bf16(pass, &yn, &self.weights.head);
        pass.device.mark(|| "head queued".into());
        logits
    }
}

impl Output {
    /// The logit rows read back, or with `picks` their greedy picks (f32 ids).
    pub(crate) fn place(&mut self, values: Vec<f32>, picks: bool) {
        match picks {
            true => self.picks = values.into_iter().map(|id| id as u32).collect(),
            false => self.logits = values,
        }
    }
}

/// `logits`, or with `picks` each row's greedy pick made on the pass's device, so only the picks come back.
fn picked(pass: &Pass<'_>, logits: Result<Act, String>, picks: bool) -> Result<Act, String> {
    let vocab = pass.model.config.vocab_size;
    logits.map(|l| match picks {
        true => ops::logits_argmax(&pass.device, &l, vocab),
        false => l,
    })
}

/// The pass's last streams and its logits on the host, read back with its deferred cache writes in one wait for the GPU.
fn read_back(
    pass: &Pass<'_>,
    cache: &mut Dsv4Cache,
    x: Act,
    logits: Result<Act, String>,
) -> (Vec<f32>, Result<Vec<f32>, String>) {
    let (acts, err) = match logits {
        Ok(l) => (vec![x, l], None),
        Err(e) => (vec![x], Some(e)),
    };
    let mut values = pass.settle(cache, acts).into_iter();
    let last = values.next().expect("the last streams read back");
    (
        last,
        err.map_or_else(|| Ok(values.next().expect("the logits read back")), Err),
    )
}
