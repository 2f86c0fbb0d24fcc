//! The DeepSeek V4.1 forward pass built from registered kernels: embedding, Engram, lagged-mHC blocks over CSA2 attention, the head.

mod attention;
mod block;
mod compressor;
pub mod dspark;
mod engram;
mod indexer;
mod linear;
mod moe;

use std::collections::BTreeMap;
use std::path::Path;

use tensorfold_kernels::Faults;
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::embedding::embedding;
use tensorfold_kernels::hc_pre::hc_pre;
use tensorfold_kernels::logits_argmax::pick;
use tensorfold_kernels::rms_norm::rms_norm;
use tensorfold_kernels::rope::{Yarn, inv_freqs};

use super::engram::{LayerTables, TokenMap, layer_tables};
use super::weights::Dsv41Weights;
use crate::config::dsv41::Dsv41TextConfig;
use crate::dsv4::batch::{Batch, SeqRows};
use crate::dsv4::blocks::BlockLayout;
use crate::dsv4::cache::Dsv4Cache;
pub use crate::dsv4::forward::{ForwardOptions, Output};

/// Everything a V4.1 forward pass needs besides the batch and the cache.
pub struct Dsv41Model {
    pub config: Dsv41TextConfig,
    pub weights: Dsv41Weights,
    /// Where each KV source's entries and index keys sit in a cache block.
    pub layout: BlockLayout,
    /// Engram's tokenizer id to compressed id map and each Engram layer's hash tables.
    pub token_map: TokenMap,
    pub engram_tables: Vec<LayerTables>,
    /// RoPE inverse frequencies of window-only layers (plain) and compressed layers (YaRN).
    rope_main: Vec<f32>,
    rope_compress: Vec<f32>,
}

/// Per-row results a layer publishes for the layers above it in the same pass.
#[derive(Default)]
pub(crate) struct Published {
    /// Each index source's top-k `[rows, index_topk]` (entry indices ascending, -1 padded).
    pub topk: BTreeMap<usize, Vec<i32>>,
    /// The candidate source's kept blocks `[rows, candidate_topk_blocks]` (-1 padded).
    pub pool: Option<Vec<i32>>,
}

/// What the layers of one pass share: rows, their positions and sequences, and the launch.
pub(crate) struct Pass<'a> {
    pub launch: CpuLaunch,
    pub positions: Vec<i32>,
    pub token_ids: Vec<i32>,
    pub groups: Vec<SeqRows>,
    pub model: &'a Dsv41Model,
}

impl Pass<'_> {
    pub fn rows(&self) -> usize {
        self.positions.len()
    }

    pub fn eps(&self) -> f32 {
        self.model.config.rms_norm_eps as f32
    }

    pub fn faults(&self) -> (&CpuLaunch, Faults) {
        (&self.launch, Faults::NONE)
    }
}

impl Dsv41Model {
    /// A model over `weights`; `tokenizer` builds Engram's token map.
    pub fn new(
        config: Dsv41TextConfig,
        weights: Dsv41Weights,
        tokenizer: &tokenizers::Tokenizer,
    ) -> Result<Dsv41Model, String> {
        let c = &config;
        let token_map = TokenMap::build(tokenizer)?;
        if token_map.num_compressed != c.engram_compressed_vocab_size {
            return Err(format!(
                "the tokenizer folds to {} Engram ids but engram_compressed_vocab_size is {}; use the checkpoint's own tokenizer.json",
                token_map.num_compressed, c.engram_compressed_vocab_size
            ));
        }
        if token_map.compressed.len() < c.vocab_size {
            return Err(format!(
                "the tokenizer has {} ids, fewer than vocab_size {}; use the checkpoint's own tokenizer.json",
                token_map.compressed.len(),
                c.vocab_size
            ));
        }
        let engram_tables = layer_tables(
            &c.engram_layer_ids,
            &c.engram_vocab_size,
            c.engram_n_heads,
            token_map.num_compressed as u64,
        );
        let rope_main = inv_freqs(c.qk_rope_head_dim, c.rope_theta, None);
        let yarn = Yarn {
            factor: c.rope_scaling.factor,
            original_max_position_embeddings: c.rope_scaling.original_max_position_embeddings as f64,
            beta_fast: c.rope_scaling.beta_fast,
            beta_slow: c.rope_scaling.beta_slow,
        };
        let rope_compress = inv_freqs(c.qk_rope_head_dim, c.compress_rope_theta, Some(yarn));
        let layout = BlockLayout::new(c);
        Ok(Dsv41Model {
            config,
            weights,
            layout,
            token_map,
            engram_tables,
            rope_main,
            rope_compress,
        })
    }

    /// RoPE frequencies for a layer of compress `ratio` (ratios 1 and 2 both take YaRN, as the reference tests `if compress_ratio`).
    pub(crate) fn rope_for(&self, ratio: usize) -> &[f32] {
        if ratio == 0 {
            &self.rope_main
        } else {
            &self.rope_compress
        }
    }

    /// Checks `batch` against each sequence's position, its blocks and the vocabulary, and lays out its rows.
    fn pass(&self, batch: &Batch, cache: &mut Dsv4Cache, launch: CpuLaunch) -> Result<Pass<'_>, String> {
        let c = &self.config;
        let groups = batch.by_seq()?;
        for g in &groups {
            let pos = cache.seq_mut(g.seq, c).len;
            if pos != g.start {
                return Err(format!(
                    "sequence {} is at position {pos}, the batch starts it at {}",
                    g.seq.0, g.start
                ));
            }
            cache.cover(g.seq, g.start as usize + g.rows.len())?;
        }
        if let Some(&t) = batch.token_ids.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(format!("token id {t} is outside the vocabulary of {}", c.vocab_size));
        }
        Ok(Pass {
            launch,
            positions: batch.positions.iter().map(|&p| p as i32).collect(),
            token_ids: batch.token_ids.iter().map(|&t| t as i32).collect(),
            groups,
            model: self,
        })
    }

    /// Runs `batch` with `opts`, reading and advancing each sequence's state in `cache`.
    pub fn forward_with(
        &self,
        batch: &Batch,
        cache: &mut Dsv4Cache,
        launch: CpuLaunch,
        opts: &ForwardOptions,
    ) -> Result<Output, String> {
        let c = &self.config;
        let pass = self.pass(batch, cache, launch)?;
        if let Some(&r) = opts.logit_rows.iter().flatten().find(|&&r| r >= pass.rows()) {
            return Err(format!("logit row {r} is outside the batch of {} rows", pass.rows()));
        }
        let (rows, d, hc) = (pass.rows(), c.hidden_size, c.hc_mult);
        let (l, f) = pass.faults();
        let mut emb = vec![0f32; rows * d];
        embedding(&self.weights.embed.bytes, d, &pass.token_ids, &mut emb, l, f);
        let mut x: Vec<f32> = emb.chunks(d).flat_map(|row| row.repeat(hc)).collect(); // [rows, hc, D]
        // Layer 0's incoming pre-mix is one-hot on stream 0.
        let mut pi: Vec<f32> = (0..rows * hc).map(|i| (i % hc == 0) as u8 as f32).collect(); // [rows, hc]
        let grams = engram::ngrams(&pass, cache);
        let mut published = Published::default();
        let mut out = Output::default();
        let mut means = Vec::new();
        for (layer_idx, w) in self.weights.layers.iter().enumerate() {
            if self.weights.dspark.is_some() && c.dspark_target_layer_ids.contains(&layer_idx) {
                means.push(dspark::mean_streams(&pass, &x));
            }
            if let Some(e) = &w.engram {
                engram::engram(&pass, layer_idx, e, &grams, &mut x);
            }
            (x, pi) = block::block(&pass, layer_idx, w, &x, &pi, cache, &mut published);
            if opts.keep_layers {
                out.layer_streams.push(x.clone());
            }
        }
        dspark::fill_rings(&pass, &means, cache);
        for g in &pass.groups {
            let seq = cache.seq_mut(g.seq, c);
            seq.len += g.rows.len() as u32;
            if let Some(s) = self.layout.tokens {
                seq.tokens.extend(g.rows.iter().map(|&r| pass.token_ids[r] as u32));
                for (i, &r) in g.rows.iter().enumerate() {
                    let id = [f32::from_bits(pass.token_ids[r] as u32)];
                    let (table, at) = (&cache.tables[&g.seq], g.start as usize + i);
                    cache.store.put_row(table, s, at, &id, self.layout.floats);
                }
            }
        }
        let picked: Vec<usize> = opts.logit_rows.clone().unwrap_or_else(|| (0..rows).collect());
        let n = hc * d;
        let xs: Vec<f32> = picked
            .iter()
            .flat_map(|&r| x[r * n..(r + 1) * n].iter().copied())
            .collect();
        let pis: Vec<f32> = picked
            .iter()
            .flat_map(|&r| pi[r * hc..(r + 1) * hc].iter().copied())
            .collect();
        let logits = self.head(&pass, &xs, &pis);
        match opts.picks {
            true => out.picks = logits.chunks(c.vocab_size).map(pick).collect(),
            false => out.logits = logits,
        }
        out.last_streams = x;
        Ok(out)
    }

    /// The collapse with the last layer's ffn pre-mix (no hc_head), the final norm and the vocabulary head: `[rows, hc, D]` to `[rows, vocab]`.
    fn head(&self, pass: &Pass<'_>, x: &[f32], pi: &[f32]) -> Vec<f32> {
        let c = &self.config;
        let (d, hc) = (c.hidden_size, c.hc_mult);
        let rows = pi.len() / hc;
        let (l, f) = pass.faults();
        let mut y = vec![0f32; rows * d];
        hc_pre(x, pi, hc, d, &mut y, l, f);
        let mut yn = vec![0f32; rows * d];
        rms_norm(&y, &self.weights.norm, pass.eps(), &mut yn, l, f);
        linear::bf16(pass, &yn, &self.weights.head)
    }
}

/// Opens, checks and loads the V4.1 checkpoint in `dir` (its tokenizer builds Engram's token map).
pub fn load_model(dir: &Path) -> Result<Dsv41Model, String> {
    let ckpt = super::Dsv41Checkpoint::open(dir).map_err(|e| e.to_string())?;
    let weights = Dsv41Weights::new(&ckpt.weights, &ckpt.config.text_config);
    let path = dir.join("tokenizer.json");
    let tokenizer = tokenizers::Tokenizer::from_file(&path).map_err(|e| {
        format!(
            "{}: not a readable tokenizer ({e}); Engram's token map is built from it",
            path.display()
        )
    })?;
    Dsv41Model::new(ckpt.config.text_config, weights, &tokenizer)
}
