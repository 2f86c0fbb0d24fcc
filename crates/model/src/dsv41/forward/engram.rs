//! Engram before its blocks: n-gram hashes of the compressed token ids, FP8 table rows, the key/value projection and the per-stream gate.

use tensorfold_kernels::engram_gate::engram_gate;
use tensorfold_kernels::engram_hash::engram_hash;
use tensorfold_kernels::engram_lookup::engram_lookup;

use super::{Pass, linear};
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv41::weights::Engram;

/// Each row's compressed ids of its position and the `max_ngram - 1` before it, `[rows, max_ngram]` (pad before the sequence start).
pub(crate) fn ngrams(pass: &Pass<'_>, cache: &mut Dsv4Cache) -> Vec<i32> {
    let m = pass.model;
    let c = &m.config;
    let n = c.engram_max_ngram_size;
    let pad = m.token_map.get(c.engram_pad_id) as i32;
    let mut out = vec![pad; pass.rows() * n];
    if c.engram_layer_ids.is_empty() {
        return out;
    }
    for g in &pass.groups {
        let history = &cache.seq_mut(g.seq, c).tokens;
        assert_eq!(
            history.len(),
            g.start as usize,
            "a sequence keeps the token ids of every position it has run"
        );
        let token = |p: usize| -> u32 {
            if p < g.start as usize {
                history[p]
            } else {
                pass.token_ids[g.rows[p - g.start as usize]] as u32
            }
        };
        for (i, &r) in g.rows.iter().enumerate() {
            let t = g.start as usize + i;
            for back in 0..n.min(t + 1) {
                out[r * n + back] = m.token_map.get(token(t - back)) as i32;
            }
        }
    }
    out
}

/// `X_i += gate_i v` for every row, from Engram layer `layer_idx`'s 24 table rows per token.
pub(crate) fn engram(pass: &Pass<'_>, layer_idx: usize, w: &Engram, grams: &[i32], x: &mut [f32]) {
    let m = pass.model;
    let c = &m.config;
    let (rows, hd, hc, d) = (pass.rows(), c.engram_head_dim, c.hc_mult, c.hidden_size);
    let (l, f) = pass.faults();
    let tables = m
        .engram_tables
        .iter()
        .find(|t| t.layer_idx == layer_idx)
        .expect("every Engram layer has hash tables");
    let heads = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
    let primes: Vec<i32> = tables.primes.iter().map(|&p| p as i32).collect();
    let mut ids = vec![0i32; rows * heads];
    engram_hash(grams, &tables.multipliers, &primes, c.engram_n_heads, &mut ids, l, f);
    let mut emb = vec![0f32; rows * heads * hd]; // [rows, heads * engram_head_dim]
    engram_lookup(&w.embed, &w.embed_scale, hd, &ids, &mut emb, l, f);
    let kv = linear::dense(pass, &emb, &w.wkv); // [rows, (hc + 1) * D]
    let width = (hc + 1) * d;
    let keys: Vec<f32> = kv.chunks(width).flat_map(|r| r[..hc * d].iter().copied()).collect(); // [rows, hc, D]
    let v: Vec<f32> = kv.chunks(width).flat_map(|r| r[hc * d..].iter().copied()).collect(); // [rows, D]
    engram_gate(x, &keys, &v, &w.q_weight, &w.k_weight, hc, pass.eps(), l, f);
}
