//! One layer's attention: queries, KV into the window rows of the sequence's blocks, compressed entries, indexer top-k, sparse attention with the sink, inverse RoPE and the grouped output projection.

use tensorfold_kernels::index_scores::IndexShape;
use tensorfold_kernels::sparse_attn::AttnShape;

use super::act::Act;
use super::block::Mapping;
use super::compressor;
use super::front::{Front, IndexFront};
use super::pending::Pending;
use super::table::{Table, Uploaded, Which};
use super::{Pass, linear, ops};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv4::weights::Attention;

/// Runs layer `layer_idx`'s attention from its `front` (see `front.rs`), returning `[rows, D]` and the front's mHC mapping.
pub(crate) fn attention(
    pass: &Pass<'_>,
    layer_idx: usize,
    w: &Attention,
    front: Front,
    cache: &mut Dsv4Cache,
) -> (Act, Mapping) {
    let m = pass.model;
    let c = &m.config;
    let dev = &pass.device;
    let (rows, h, hd) = (pass.rows(), c.num_attention_heads, c.head_dim);
    let ratio = c.compress_ratio(layer_idx);
    let freqs = m.rope_for(ratio);
    let Front {
        map,
        q,
        kv,
        comp,
        index,
    } = front;

    if let (Some(w), Some(rows)) = (&w.compressor, comp) {
        compressor::step(pass, layer_idx, w, rows, cache, EntryKind::Kv);
    }
    let scores = match (&w.indexer, index) {
        (Some(idx), Some(front)) => {
            let IndexFront { iq, iw, comp } = front;
            compressor::step(pass, layer_idx, &idx.compressor, comp, cache, EntryKind::Index);
            indexer_scores(pass, layer_idx, &iq, &iw, cache)
        }
        _ => None,
    };

    dev.mark(|| format!("layer {layer_idx} compressors and index scores"));
    let (table, lists, width, picks) = gather(pass, layer_idx, &kv, w.indexer.is_some(), cache);
    let mut lists = dev.put(lists);
    dev.mark(|| format!("layer {layer_idx} table gathered"));
    if let (Some((scores, visible)), Some(picks)) = (scores, picks) {
        ops::index_topk(
            dev,
            &scores,
            &visible,
            c.index_topk,
            (width, picks.col),
            &picks.offsets,
            &mut lists,
        );
    }
    let shape = AttnShape {
        num_heads: h,
        head_dim: hd,
        softmax_scale: (1.0 / (hd as f64).sqrt()) as f32,
        bf16_probs: m.semantics.attn_bf16_probs,
    };
    let o = match &pass.ranks {
        Some(ranks) => {
            let (q, lists, table) = (q.to_vec(dev), lists.to_vec(dev), table.to_vec(dev));
            dev.put(ranks.attend(pass, layer_idx, ratio, &q, &lists, &table, shape))
        }
        None => {
            let mut o = dev.alloc(rows * h * hd);
            ops::sparse_attn(dev, &q, &lists, &table, &w.attn_sink, shape, &mut o);
            ops::rope(dev, &mut o, &pass.pos, hd, freqs, true);
            dev.mark(|| format!("layer {layer_idx} sparse attention"));
            o
        }
    };

    pass.defer(Pending::Window { layer: layer_idx, kv });
    let oa = linear::grouped(pass, &o, &w.wo_a, c.o_groups);
    (linear::fp8(pass, &oa, &w.wo_b), map)
}

/// The indexer's scores of each row's visible compressed entries `[rows, cols]` from its queries `iq` and head weights `iw`, and the visible counts; `None` when no row sees one.
fn indexer_scores(
    pass: &Pass<'_>,
    layer_idx: usize,
    iq: &Act,
    iw: &Act,
    cache: &mut Dsv4Cache,
) -> Option<(Act, Vec<i32>)> {
    let c = &pass.model.config;
    let dev = &pass.device;
    let (rows, ih, ihd) = (pass.rows(), c.index_n_heads, c.index_head_dim);
    let mut visible = vec![0i32; rows];
    for group in &pass.groups {
        for (i, &r) in group.rows.iter().enumerate() {
            visible[r] = ((group.start as usize + i + 1) / 4) as i32;
        }
    }
    let cols = visible.iter().copied().max().unwrap_or(0) as usize;
    if cols == 0 {
        return None;
    }
    // The kernel reads one contiguous key table, so each round gathers the keys from the sequences' blocks.
    let mut keys = Table::new(ihd, layer_idx, Which::IndexKeys);
    let mut key_range = vec![0i32; rows * 2];
    for (g, group) in pass.groups.iter().enumerate() {
        let start = keys.entries(pass, layer_idx, EntryKind::Index, cache, g) as i32;
        for &r in &group.rows {
            key_range[2 * r] = start;
            key_range[2 * r + 1] = visible[r];
        }
    }
    let mut scores = dev.alloc(rows * cols);
    let shape = IndexShape {
        num_heads: ih,
        head_dim: ihd,
        weight_scale: (1.0 / ((ihd * ih) as f64).sqrt()) as f32,
    };
    ops::index_scores(dev, iq, iw, &key_range, &keys.finish(pass, None), shape, &mut scores);
    Some((scores, visible))
}

/// Where the indexer's picks go in the entry lists: from column `col`, each row's shifted to its sequence's first entry.
struct Picks {
    col: usize,
    offsets: Vec<i32>,
}

/// The KV table (window then compressed entries of every sequence), each row's entry list (-1 padded) and its width, and where top-k picks go when `indexed`.
fn gather<'p>(
    pass: &'p Pass<'_>,
    layer_idx: usize,
    kv: &Act,
    indexed: bool,
    cache: &mut Dsv4Cache,
) -> (Uploaded<'p>, Vec<i32>, usize, Option<Picks>) {
    let c = &pass.model.config;
    let (rows, hd, window) = (pass.rows(), c.head_dim, c.sliding_window);
    let ratio = c.compress_ratio(layer_idx);
    let indexed = indexed && ratio == 4;
    // The kernel reads one contiguous KV table, so each round gathers the entries from the sequences' blocks.
    let mut table = Table::new(hd, layer_idx, Which::Kv);
    let mut lists: Vec<Vec<i32>> = vec![Vec::new(); rows];
    let mut offsets = vec![0i32; rows];
    let (layout, section) = (&pass.model.layout, pass.model.layout.window(layer_idx));
    for (g, group) in pass.groups.iter().enumerate() {
        let start = group.start as usize;
        let first = start.saturating_sub(window - 1);
        let base = table.len() as i64 - first as i64;
        for p in first..start {
            let q = layout.window_pos(layer_idx, p);
            table.host_rows(cache.store.row(cache.table(group.seq), section, q));
        }
        table.pass_rows(&group.rows);
        let comp_base = match ratio {
            0 => 0,
            _ => table.entries(pass, layer_idx, EntryKind::Kv, cache, g) as i32,
        };
        for (i, &r) in group.rows.iter().enumerate() {
            let t = start + i;
            let list = &mut lists[r];
            list.extend((t.saturating_sub(window - 1)..=t).map(|p| (base + p as i64) as i32));
            offsets[r] = comp_base;
            if ratio > 0 && !indexed {
                list.extend((0..(t + 1) / ratio).map(|j| comp_base + j as i32));
            }
        }
    }
    let col = lists.iter().map(Vec::len).max().unwrap_or(0);
    let width = col + if indexed { c.index_topk } else { 0 };
    let flat = lists.into_iter().flat_map(|mut l| {
        l.resize(width, -1);
        l
    });
    let picks = indexed.then_some(Picks { col, offsets });
    (table.finish(pass, Some(kv)), flat.collect(), width, picks)
}
