//! One layer's attention: queries, KV into the window rows of the sequence's blocks, compressed entries, indexer top-k, sparse attention with the sink, inverse RoPE and the grouped output projection.

use tensorfold_kernels::index_scores::IndexShape;
use tensorfold_kernels::sparse_attn::AttnShape;

use super::act::Act;
use super::compressor;
use super::{Pass, linear, ops};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv4::weights::{Attention, Indexer};

/// Runs layer `layer_idx`'s attention on normed rows `x` `[rows, D]`, returning `[rows, D]`.
pub(crate) fn attention(pass: &Pass<'_>, layer_idx: usize, w: &Attention, x: &Act, cache: &mut Dsv4Cache) -> Act {
    let m = pass.model;
    let c = &m.config;
    let dev = &pass.device;
    let (rows, h, hd, rope_dim) = (pass.rows(), c.num_attention_heads, c.head_dim, c.qk_rope_head_dim);
    let ratio = c.compress_ratio(layer_idx);
    let freqs = m.rope_for(ratio);

    let qa = linear::fp8(pass, x, &w.wq_a); // [rows, q_lora]
    let mut qr = dev.zeros(qa.len());
    ops::rms_norm(dev, &qa, &w.q_norm, pass.eps(), &mut qr);
    let mut q = linear::fp8(pass, &qr, &w.wq_b); // [rows, H * hd]
    ops::head_rms_norm(dev, &mut q, hd, pass.eps());
    ops::rope(dev, &mut q, &pass.pos, hd, freqs, false);

    let kv_raw = linear::fp8(pass, x, &w.wkv); // [rows, hd]
    let mut kv = dev.zeros(kv_raw.len());
    ops::rms_norm(dev, &kv_raw, &w.kv_norm, pass.eps(), &mut kv);
    ops::rope(dev, &mut kv, &pass.pos, hd, freqs, false);
    if m.semantics.kv_fp8_round_trip {
        ops::act_quant(dev, &mut kv, hd, hd - rope_dim, 64);
    }

    if let Some(comp) = &w.compressor {
        compressor::step(pass, layer_idx, comp, x, cache, EntryKind::Kv);
    }
    let selected = w.indexer.as_ref().map(|idx| {
        compressor::step(pass, layer_idx, &idx.compressor, x, cache, EntryKind::Index);
        indexer_topk(pass, layer_idx, idx, x, &qr, cache)
    });

    // The cache on the host keeps the window rows; the kernel reads this round's rows in one table.
    let kv = kv.into_vec(dev);
    let (table, lists) = gather(pass, layer_idx, &kv, selected.as_deref(), cache);
    let shape = AttnShape {
        num_heads: h,
        head_dim: hd,
        softmax_scale: (1.0 / (hd as f64).sqrt()) as f32,
        bf16_probs: m.semantics.attn_bf16_probs,
    };
    let o = match &pass.ranks {
        Some(ranks) => dev.put(ranks.attend(pass, layer_idx, ratio, &q.to_vec(dev), &lists, &table, shape)),
        None => {
            let mut o = dev.zeros(rows * h * hd);
            ops::sparse_attn(dev, &q, &lists, &dev.put(table), &w.attn_sink, shape, &mut o);
            ops::rope(dev, &mut o, &pass.pos, hd, freqs, true);
            o
        }
    };

    cache.put_window_rows(&m.layout, layer_idx, &pass.groups, &kv, hd);
    let oa = linear::grouped(pass, &o, &w.wo_a, c.o_groups);
    linear::fp8(pass, &oa, &w.wo_b)
}

/// The indexer's top-k compressed entries per row (logical entry indices, ascending, -1 padded).
fn indexer_topk(pass: &Pass<'_>, layer_idx: usize, w: &Indexer, x: &Act, qr: &Act, cache: &mut Dsv4Cache) -> Vec<i32> {
    let c = &pass.model.config;
    let dev = &pass.device;
    let (rows, ih, ihd) = (pass.rows(), c.index_n_heads, c.index_head_dim);
    let mut iq = linear::fp8(pass, qr, &w.wq_b); // [rows, ih * ihd]
    ops::rope(dev, &mut iq, &pass.pos, ihd, pass.model.rope_for(4), false);
    if pass.model.semantics.indexer_fp4_round_trip {
        ops::hadamard(dev, &mut iq, ihd);
        ops::fp4_round_trip(dev, &mut iq, ihd);
    }
    let mut iw = linear::bf16(pass, x, &w.weights_proj).into_vec(dev); // [rows, ih]
    let scale = (1.0 / ((ihd * ih) as f64).sqrt()) as f32;
    iw.iter_mut().for_each(|v| *v *= scale);
    let iw = dev.put(iw);
    let section = pass.model.layout.section(layer_idx, EntryKind::Index);
    // The kernel reads one contiguous key table, so each round gathers the keys from the sequences' blocks.
    let mut keys = Vec::new();
    let mut key_range = vec![0i32; rows * 2];
    let mut visible = vec![0i32; rows];
    for g in &pass.groups {
        let st = cache.seq_mut(g.seq, c).layers[layer_idx]
            .indexer
            .as_ref()
            .expect("ratio-4 layer has an indexer");
        let start = (keys.len() / ihd) as i32;
        let count = st.num_entries;
        cache.store.gather(cache.table(g.seq), section, count, &mut keys);
        for (i, &r) in g.rows.iter().enumerate() {
            let t = g.start as usize + i;
            visible[r] = ((t + 1) / 4) as i32;
            key_range[2 * r] = start;
            key_range[2 * r + 1] = visible[r];
        }
    }
    let top_k = c.index_topk;
    let cols = visible.iter().copied().max().unwrap_or(0) as usize;
    if cols == 0 {
        return vec![-1i32; rows * top_k];
    }
    let mut scores = dev.zeros(rows * cols);
    let shape = IndexShape {
        num_heads: ih,
        head_dim: ihd,
    };
    ops::index_scores(dev, &iq, &iw, &key_range, &dev.put(keys), shape, &mut scores);
    let mut out = dev.put(vec![-1i32; rows * top_k]);
    ops::index_topk(dev, &scores, &visible, top_k, &mut out);
    out.into_vec(dev)
}

/// The KV table (window then compressed entries of every sequence) and each row's entry list, -1 padded.
fn gather(
    pass: &Pass<'_>,
    layer_idx: usize,
    kv: &[f32],
    selected: Option<&[i32]>,
    cache: &mut Dsv4Cache,
) -> (Vec<f32>, Vec<i32>) {
    let c = &pass.model.config;
    let (rows, hd, window) = (pass.rows(), c.head_dim, c.sliding_window);
    let ratio = c.compress_ratio(layer_idx);
    let top_k = c.index_topk;
    // The kernel reads one contiguous KV table, so each round gathers the entries from the sequences' blocks.
    let mut table = Vec::new();
    let mut lists: Vec<Vec<i32>> = vec![Vec::new(); rows];
    let (layout, section) = (&pass.model.layout, pass.model.layout.window(layer_idx));
    for g in &pass.groups {
        let layer = &cache.seqs[&g.seq].layers[layer_idx];
        let start = g.start as usize;
        let first = start.saturating_sub(window - 1);
        let base = (table.len() / hd) as i64 - first as i64;
        for p in first..start {
            let q = layout.window_pos(layer_idx, p);
            table.extend_from_slice(cache.store.row(cache.table(g.seq), section, q));
        }
        for &r in &g.rows {
            table.extend_from_slice(&kv[r * hd..(r + 1) * hd]);
        }
        let comp_base = (table.len() / hd) as i32;
        if let Some(st) = &layer.compressor {
            let section = pass.model.layout.section(layer_idx, EntryKind::Kv);
            cache
                .store
                .gather(cache.table(g.seq), section, st.num_entries, &mut table);
        }
        for (i, &r) in g.rows.iter().enumerate() {
            let t = start + i;
            let list = &mut lists[r];
            list.extend((t.saturating_sub(window - 1)..=t).map(|p| (base + p as i64) as i32));
            match (ratio, selected) {
                (4, Some(sel)) => list.extend(
                    sel[r * top_k..(r + 1) * top_k]
                        .iter()
                        .filter(|&&j| j >= 0)
                        .map(|&j| comp_base + j),
                ),
                (0, _) => {}
                _ => list.extend((0..(t + 1) / ratio).map(|j| comp_base + j as i32)),
            }
        }
    }
    let width = lists.iter().map(Vec::len).max().unwrap_or(0);
    let flat = lists.into_iter().flat_map(|mut l| {
        l.resize(width, -1);
        l
    });
    (table, flat.collect())
}
