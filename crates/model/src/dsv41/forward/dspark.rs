//! DSpark drafting: the main pass fills each stage's ring from the target layers' mean streams; a draft block runs the stages on `[y, noise...]` over the rings, then the Markov and confidence heads.

use tensorfold_kernels::bf16_gemm::bf16_gemm;
use tensorfold_kernels::dspark_markov::dspark_markov;
use tensorfold_kernels::embedding::embedding;
use tensorfold_kernels::hc_pre::hc_pre;
use tensorfold_kernels::rms_norm::rms_norm;
use tensorfold_kernels::sparse_attn::{AttnShape, sparse_attn};

use super::{Dsv41Model, Pass, attention, block, linear};
use crate::dsv4::batch::{Batch, SeqSlot};
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv41::weights::{Attention, Dspark};

/// One draft of a block: the token and the confidence head's chance that it is accepted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draft {
    pub token: u32,
    pub confidence: f32,
}

/// The mean of the 4 streams `x` `[rows, hc, D]` (one target layer's input), `[rows, D]`.
pub(crate) fn mean_streams(pass: &Pass<'_>, x: &[f32]) -> Vec<f32> {
    let (hc, d) = (pass.model.config.hc_mult, pass.model.config.hidden_size);
    let rows = pass.rows();
    let (l, f) = pass.faults();
    let pi = vec![1.0 / hc as f32; rows * hc];
    let mut y = vec![0f32; rows * d];
    hc_pre(x, &pi, hc, d, &mut y, l, f);
    y
}

/// Writes every row's ring entry of each stage (`kv_norm(wkv main_x)`, RoPE, FP8) from `means`, the target layers' mean streams in config order.
pub(crate) fn fill_rings(pass: &Pass<'_>, means: &[Vec<f32>], cache: &mut Dsv4Cache) {
    let m = pass.model;
    let Some(w) = &m.weights.dspark else { return };
    let (rows, d, hd) = (pass.rows(), m.config.hidden_size, m.config.head_dim);
    let hidden: Vec<f32> = (0..rows)
        .flat_map(|r| means.iter().flat_map(move |t| t[r * d..(r + 1) * d].iter().copied()))
        .collect();
    let main_x = norm(pass, &linear::dense(pass, &hidden, &w.main_proj), &w.main_norm);
    for (s, stage) in w.stages.iter().enumerate() {
        let kv = attention::window_kv(pass, &stage.attn, &main_x, &pass.positions, m.rope_for(0));
        cache.put_window_rows(&m.layout, m.config.num_hidden_layers + s, &pass.groups, &kv, hd);
    }
}

fn norm(pass: &Pass<'_>, x: &[f32], weight: &[f32]) -> Vec<f32> {
    let (l, f) = pass.faults();
    let mut y = vec![0f32; x.len()];
    rms_norm(x, weight, pass.eps(), &mut y, l, f);
    y
}

/// Stage `stage`'s attention for the block rows `u`: every row reads its sequence's ring and the whole block, both directions.
fn attend(pass: &Pass<'_>, stage: usize, w: &Attention, u: &[f32], cache: &Dsv4Cache) -> Vec<f32> {
    let m = pass.model;
    let c = &m.config;
    let (rows, h, hd, window) = (pass.rows(), c.num_attention_heads, c.head_dim, c.sliding_window);
    let freqs = m.rope_for(0);
    let (_, q) = attention::query(pass, w, u, freqs);
    let kv = attention::window_kv(pass, w, u, &pass.positions, freqs);
    let layer = c.num_hidden_layers + stage;
    let ring = m.layout.window(layer);
    let (mut table, mut lists) = (Vec::new(), vec![Vec::new(); rows]);
    for g in &pass.groups {
        let first = (table.len() / hd) as i32;
        for p in (g.start as usize).saturating_sub(window)..g.start as usize {
            let q = m.layout.window_pos(layer, p);
            table.extend_from_slice(cache.store.row(cache.table(g.seq), ring, q));
        }
        for &r in &g.rows {
            table.extend_from_slice(&kv[r * hd..(r + 1) * hd]);
        }
        for &r in &g.rows {
            lists[r] = (first..(table.len() / hd) as i32).collect();
        }
    }
    let width = lists.iter().map(Vec::len).max().unwrap_or(0);
    let lists: Vec<i32> = lists
        .into_iter()
        .flat_map(|mut l| {
            l.resize(width, -1);
            l
        })
        .collect();
    let shape = AttnShape {
        num_heads: h,
        head_dim: hd,
        softmax_scale: (1.0 / (hd as f64).sqrt()) as f32,
        bf16_probs: false,
    };
    let mut o = vec![0f32; rows * h * hd];
    let (l, f) = pass.faults();
    sparse_attn(&q, &lists, &table, &w.attn_sink, shape, &mut o, l, f);
    attention::output(pass, w, o, freqs)
}

impl Dsv41Model {
    /// Drafts a block for each lane `(sequence, y)`, where y is the token sampled after the sequence's last position: the stages run on `[y, noise...]` and `pick(lane, j, logits)` draws draft j (the token at the sequence's length + 1 + j). Reads the cache only.
    pub fn dspark_draft(
        &self,
        lanes: &[(SeqSlot, u32)],
        cache: &Dsv4Cache,
        launch: tensorfold_kernels::cpu::CpuLaunch,
        pick: &mut dyn FnMut(usize, usize, &[f32]) -> u32,
    ) -> Result<Vec<Vec<Draft>>, String> {
        let c = &self.config;
        let w = self
            .weights
            .dspark
            .as_ref()
            .ok_or("the checkpoint has no DSpark stages")?;
        let size = c.dspark_block_size;
        let mut batch = Batch::default();
        for &(seq, y) in lanes {
            let len = cache.seqs.get(&seq).ok_or("a drafting sequence has state")?.len;
            if y as usize >= c.vocab_size {
                return Err(format!("token id {y} is outside the vocabulary of {}", c.vocab_size));
            }
            let mut block = vec![c.dspark_noise_token_id; size];
            block[0] = y;
            batch.push_seq(seq, len, &block);
        }
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let pass = Pass {
            launch,
            positions: batch.positions.iter().map(|&p| p as i32).collect(),
            token_ids: batch.token_ids.iter().map(|&t| t as i32).collect(),
            groups: batch.by_seq()?,
            model: self,
        };
        let h = self.dspark_hidden(&pass, w, cache);
        let logits = linear::bf16(&pass, &norm(&pass, &h, &w.norm), &self.weights.head);
        Ok(self.dspark_heads(&pass, w, &h, &logits, lanes, pick))
    }

    /// The stages on the block rows, collapsed with the last stage's ffn pre-mix: `h` `[rows, D]`.
    fn dspark_hidden(&self, pass: &Pass<'_>, w: &Dspark, cache: &Dsv4Cache) -> Vec<f32> {
        let c = &self.config;
        let (rows, d, hc) = (pass.rows(), c.hidden_size, c.hc_mult);
        let (l, f) = pass.faults();
        let mut emb = vec![0f32; rows * d];
        embedding(&self.weights.embed.bytes, d, &pass.token_ids, &mut emb, l, f);
        let mut x: Vec<f32> = emb.chunks(d).flat_map(|row| row.repeat(hc)).collect();
        let mut pi: Vec<f32> = (0..rows * hc).map(|i| (i % hc == 0) as u8 as f32).collect();
        for (s, stage) in w.stages.iter().enumerate() {
            (x, pi) = block::block_with(pass, stage, &x, &pi, |u| attend(pass, s, &stage.attn, u, cache));
        }
        let mut h = vec![0f32; rows * d];
        hc_pre(&x, &pi, hc, d, &mut h, l, f);
        h
    }

    /// Draws each lane's drafts in turn: draft j's logits get the Markov term of the token before it, its confidence reads `[h_j ; E_m[prev]]`.
    fn dspark_heads(
        &self,
        pass: &Pass<'_>,
        w: &Dspark,
        h: &[f32],
        logits: &[f32],
        lanes: &[(SeqSlot, u32)],
        pick: &mut dyn FnMut(usize, usize, &[f32]) -> u32,
    ) -> Vec<Vec<Draft>> {
        let c = &self.config;
        let (d, vocab, rank, size) = (c.hidden_size, c.vocab_size, c.dspark_markov_rank, c.dspark_block_size);
        let (l, f) = pass.faults();
        let mut prev: Vec<i32> = lanes.iter().map(|&(_, y)| y as i32).collect();
        let mut drafts: Vec<Vec<Draft>> = vec![Vec::with_capacity(size); lanes.len()];
        for j in 0..size {
            // Lane i's block is rows i * size.. of the batch.
            let rows: Vec<usize> = (0..lanes.len()).map(|i| i * size + j).collect();
            let mut row_logits: Vec<f32> = rows
                .iter()
                .flat_map(|&r| logits[r * vocab..(r + 1) * vocab].iter().copied())
                .collect();
            dspark_markov(
                &w.markov_embed.bytes,
                &w.markov_head.bytes,
                rank,
                &prev,
                &mut row_logits,
                l,
                f,
            );
            let mut e = vec![0f32; lanes.len() * rank];
            embedding(&w.markov_embed.bytes, rank, &prev, &mut e, l, f);
            let joined: Vec<f32> = rows
                .iter()
                .enumerate()
                .flat_map(|(i, &r)| {
                    h[r * d..(r + 1) * d]
                        .iter()
                        .chain(&e[i * rank..(i + 1) * rank])
                        .copied()
                })
                .collect();
            let mut conf = vec![0f32; lanes.len()];
            bf16_gemm(&joined, w.confidence.words(), 1, d + rank, &mut conf, l, f);
            for (i, out) in drafts.iter_mut().enumerate() {
                let token = pick(i, j, &row_logits[i * vocab..(i + 1) * vocab]);
                prev[i] = token as i32;
                out.push(Draft {
                    token,
                    confidence: 1.0 / (1.0 + (-conf[i]).exp()),
                });
            }
        }
        drafts
    }
}
