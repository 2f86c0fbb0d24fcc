//! One layer's CSA2 attention: queries, FP8 window KV, the owned compressor, indexer top-k, sparse attention with the sink, inverse RoPE, grouped output.

use tensorfold_kernels::act_quant::act_quant;
use tensorfold_kernels::rms_norm::rms_norm;
use tensorfold_kernels::rope::rope;
use tensorfold_kernels::sparse_attn::{AttnShape, sparse_attn};

use super::{Pass, Published, compressor, indexer, linear};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv41::weights::Attention;

/// Values per window-KV FP8 scale (all head dims, RoPE ones included).
const WINDOW_FP8_BLOCK: usize = 32;

/// Runs layer `layer_idx`'s attention on normed rows `x` `[rows, D]`, returning `[rows, D]`.
pub(crate) fn attention(
    pass: &Pass<'_>,
    layer_idx: usize,
    w: &Attention,
    x: &[f32],
    cache: &mut Dsv4Cache,
    published: &mut Published,
) -> Vec<f32> {
    let m = pass.model;
    let c = &m.config;
    let (rows, h, hd) = (pass.rows(), c.num_attention_heads, c.head_dim);
    let plan = c.layer_plan(layer_idx);
    let (l, f) = pass.faults();
    let freqs = m.rope_for(plan.ratio);

    let (qr, q) = query(pass, w, x, freqs);
    let kv = window_kv(pass, w, x, &pass.positions, freqs);

    if let Some(comp) = &w.compressor {
        compressor::step(pass, layer_idx, comp, w.index_keys.as_ref(), x, cache);
    }
    if let Some(iq) = &w.index_query {
        indexer::topk(pass, layer_idx, iq, x, &qr, cache, published);
    }
    let selected = plan.topk_from.map(|src| published.topk[&src].as_slice());
    let (table, lists) = gather(pass, layer_idx, &kv, selected, cache);
    let mut o = vec![0f32; rows * h * hd];
    let shape = AttnShape {
        num_heads: h,
        head_dim: hd,
        softmax_scale: (1.0 / (hd as f64).sqrt()) as f32,
        bf16_probs: false,
    };
    sparse_attn(&q, &lists, &table, &w.attn_sink, shape, &mut o, l, f);
    cache.put_window_rows(&pass.model.layout, layer_idx, &pass.groups, &kv, hd);
    output(pass, w, o, freqs)
}

/// The normed low-rank query `qr` `[rows, q_lora]` and the roped heads `q` `[rows, H * hd]` of rows `x`.
pub(crate) fn query(pass: &Pass<'_>, w: &Attention, x: &[f32], freqs: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (l, f) = pass.faults();
    let hd = pass.model.config.head_dim;
    let qa = linear::dense(pass, x, &w.wq_a); // [rows, q_lora]
    let mut qr = vec![0f32; qa.len()];
    rms_norm(&qa, &w.q_norm, pass.eps(), &mut qr, l, f);
    let mut q = linear::dense(pass, &qr, &w.wq_b); // [rows, H * hd]
    rope(&mut q, &pass.positions, hd, freqs, false, l, f);
    (qr, q)
}

/// Window KV of rows `x` at `positions`: `kv_norm(wkv x)`, RoPE, FP8 fake-quant per 32 (`[rows, hd]`).
pub(crate) fn window_kv(pass: &Pass<'_>, w: &Attention, x: &[f32], positions: &[i32], freqs: &[f32]) -> Vec<f32> {
    let (l, f) = pass.faults();
    let hd = pass.model.config.head_dim;
    let kv_raw = linear::dense(pass, x, &w.wkv); // [rows, hd]
    let mut kv = vec![0f32; kv_raw.len()];
    rms_norm(&kv_raw, &w.kv_norm, pass.eps(), &mut kv, l, f);
    rope(&mut kv, positions, hd, freqs, false, l, f);
    act_quant(&mut kv, hd, hd, WINDOW_FP8_BLOCK, l, f);
    kv
}

/// Inverse RoPE on the heads' outputs `o` `[rows, H * hd]`, then the grouped `wo_a` and `wo_b`: `[rows, D]`.
pub(crate) fn output(pass: &Pass<'_>, w: &Attention, mut o: Vec<f32>, freqs: &[f32]) -> Vec<f32> {
    let (l, f) = pass.faults();
    let c = &pass.model.config;
    rope(&mut o, &pass.positions, c.head_dim, freqs, true, l, f);
    let oa = linear::grouped(pass, &o, &w.wo_a, c.o_groups);
    linear::dense(pass, &oa, &w.wo_b)
}

/// The KV table (window then the KV source's compressed entries, per sequence) and each row's entry list, -1 padded.
fn gather(
    pass: &Pass<'_>,
    layer_idx: usize,
    kv: &[f32],
    selected: Option<&[i32]>,
    cache: &mut Dsv4Cache,
) -> (Vec<f32>, Vec<i32>) {
    let c = &pass.model.config;
    let (rows, hd, window, top_k) = (pass.rows(), c.head_dim, c.sliding_window, c.index_topk);
    let source = c.layer_plan(layer_idx).kv_source;
    let mut table = Vec::new();
    let mut lists: Vec<Vec<i32>> = vec![Vec::new(); rows];
    let (layout, window_rows) = (&pass.model.layout, pass.model.layout.window(layer_idx));
    for g in &pass.groups {
        let seq = &cache.seqs[&g.seq];
        let start = g.start as usize;
        let first = start.saturating_sub(window - 1);
        let base = (table.len() / hd) as i64 - first as i64;
        for p in first..start {
            let q = layout.window_pos(layer_idx, p);
            table.extend_from_slice(cache.store.row(cache.table(g.seq), window_rows, q));
        }
        for &r in &g.rows {
            table.extend_from_slice(&kv[r * hd..(r + 1) * hd]);
        }
        let comp_base = (table.len() / hd) as i32;
        if let Some(src) = source {
            let count = seq.layers[src]
                .compressor
                .as_ref()
                .expect("a KV source has compressor state")
                .num_entries;
            let section = pass.model.layout.section(src, EntryKind::Kv);
            cache.store.gather(cache.table(g.seq), section, count, &mut table);
        }
        for (i, &r) in g.rows.iter().enumerate() {
            let t = start + i;
            let list = &mut lists[r];
            list.extend((t.saturating_sub(window - 1)..=t).map(|p| (base + p as i64) as i32));
            if let Some(sel) = selected {
                let picked = sel[r * top_k..(r + 1) * top_k].iter().filter(|&&j| j >= 0);
                list.extend(picked.map(|&j| comp_base + j));
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
