//! An index source's scores over its key owner's keys, the candidate pool (published by the candidate source, applied above it) and top-k.

use tensorfold_kernels::candidate_pool::candidate_pool;
use tensorfold_kernels::fp4_round_trip::fp4_round_trip;
use tensorfold_kernels::index_scores::{IndexShape, index_scores};
use tensorfold_kernels::index_topk::index_topk;
use tensorfold_kernels::rope::rope;

use super::{Pass, Published, linear};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv41::weights::IndexQuery;

/// Publishes index source `layer_idx`'s top-k per row (and the candidate pool when it is the candidate source).
pub(crate) fn topk(
    pass: &Pass<'_>,
    layer_idx: usize,
    w: &IndexQuery,
    x: &[f32],
    qr: &[f32],
    cache: &mut Dsv4Cache,
    published: &mut Published,
) {
    let c = &pass.model.config;
    let plan = c.layer_plan(layer_idx);
    let owner = plan.key_owner.expect("an index source has a key owner");
    let (rows, ih, ihd, ratio) = (pass.rows(), c.index_n_heads, c.index_head_dim, plan.ratio);
    let (l, f) = pass.faults();
    let mut iq = linear::dense(pass, qr, &w.wq_b); // [rows, ih * ihd]
    rope(&mut iq, &pass.positions, ihd, pass.model.rope_for(ratio), false, l, f);
    fp4_round_trip(&mut iq, ihd, l, f);
    let mut iw = linear::bf16(pass, x, &w.weights_proj); // [rows, ih]
    let scale = (1.0 / ((ihd * ih) as f64).sqrt()) as f32;
    iw.iter_mut().for_each(|v| *v *= scale);
    let section = pass.model.layout.section(owner, EntryKind::Index);
    // The kernel reads one contiguous key table, so each round gathers the keys from the sequences' blocks.
    let (mut keys, mut key_range, mut visible) = (Vec::new(), vec![0i32; rows * 2], vec![0i32; rows]);
    for g in &pass.groups {
        let count = cache.seqs[&g.seq].layers[owner]
            .compressor
            .as_ref()
            .expect("a key owner is a KV source")
            .num_entries;
        let start = (keys.len() / ihd) as i32;
        cache.store.gather(cache.table(g.seq), section, count, &mut keys);
        for (i, &r) in g.rows.iter().enumerate() {
            visible[r] = ((g.start as usize + i + 1) / ratio) as i32;
            key_range[2 * r] = start;
            key_range[2 * r + 1] = visible[r];
        }
    }
    let top_k = c.index_topk;
    let mut out = vec![-1i32; rows * top_k];
    let cols = visible.iter().copied().max().unwrap_or(0) as usize;
    if cols > 0 {
        let mut scores = vec![0f32; rows * cols];
        let shape = IndexShape {
            num_heads: ih,
            head_dim: ihd,
            weight_scale: 1.0,
        };
        index_scores(&iq, &iw, &key_range, &keys, shape, &mut scores, l, f);
        let (block, kept) = (c.candidate_block_size, c.candidate_topk_blocks);
        if layer_idx == c.candidate_source_layer_id {
            let mut pool = vec![-1i32; rows * kept];
            candidate_pool(&scores, &visible, block, kept, &mut pool, l, f);
            published.pool = Some(pool);
        }
        if plan.candidate_masked {
            let pool = published
                .pool
                .as_ref()
                .expect("the candidate source runs below the layers it masks");
            for (r, row) in scores.chunks_mut(cols).enumerate() {
                let mut keep = vec![false; cols];
                for &b in pool[r * kept..(r + 1) * kept].iter().filter(|&&b| b >= 0) {
                    let from = b as usize * block;
                    keep[from..(from + block).min(cols)].fill(true);
                }
                for (s, _) in row.iter_mut().zip(&keep).filter(|(_, k)| !**k) {
                    *s = f32::NEG_INFINITY;
                }
            }
        }
        index_topk(&scores, &visible, top_k, &mut out, l, f);
    }
    published.topk.insert(layer_idx, out);
}
