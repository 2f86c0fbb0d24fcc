//! Feeds a batch's rows into each sequence's compressor and appends the entries they finish.

use tensorfold_kernels::compress::CompressShape;

use super::act::Act;
use super::{Pass, linear, ops};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::{CompressorState, Dsv4Cache};
use crate::dsv4::weights::Compressor;

fn state<'c>(
    cache: &'c mut Dsv4Cache,
    pass: &Pass<'_>,
    g: usize,
    layer_idx: usize,
    kind: EntryKind,
) -> &'c mut CompressorState {
    let layer = &mut cache.seq_mut(pass.groups[g].seq, &pass.model.config).layers[layer_idx];
    let s = if kind == EntryKind::Kv {
        &mut layer.compressor
    } else {
        &mut layer.indexer
    };
    s.as_mut().expect("a compressed layer has compressor state")
}

/// Appends the rows' projections to every sequence's state of `kind` and computes the entries they finish.
pub(crate) fn step(pass: &Pass<'_>, layer_idx: usize, w: &Compressor, x: &Act, cache: &mut Dsv4Cache, kind: EntryKind) {
    let dev = &pass.device;
    let (ratio, hd) = (w.ratio, w.head_dim);
    let shape = CompressShape {
        ratio,
        head_dim: hd,
        overlap: ratio == 4,
    };
    let width = shape.width();
    // The compressor state on the host keeps every row not yet finished into an entry.
    let kv = linear::bf16(pass, x, &w.wkv).into_vec(dev);
    let gate = linear::bf16(pass, x, &w.wgate).into_vec(dev);
    let (mut table_kv, mut table_gate, mut token_idx, mut positions) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut new_per_group = Vec::new();
    for (g, group) in pass.groups.iter().enumerate() {
        let st = state(cache, pass, g, layer_idx, kind);
        for &r in &group.rows {
            st.kv.extend_from_slice(&kv[r * width..(r + 1) * width]);
            st.gate.extend_from_slice(&gate[r * width..(r + 1) * width]);
        }
        let base = (table_kv.len() / width) as i64 - st.first_pos as i64;
        table_kv.extend_from_slice(&st.kv);
        table_gate.extend_from_slice(&st.gate);
        let end = group.start as usize + group.rows.len();
        let (done_before, done_after) = (group.start as usize / ratio, end / ratio);
        for entry in done_before..done_after {
            for s in 0..shape.slots() {
                let pos = if shape.overlap {
                    (entry as i64 - 1) * ratio as i64 + s as i64
                } else {
                    (entry * ratio + s) as i64
                };
                token_idx.push(if pos < 0 { -1 } else { (base + pos) as i32 });
            }
            positions.push((entry * ratio) as i32);
        }
        new_per_group.push(done_after - done_before);
    }
    let num_new = positions.len();
    if num_new > 0 {
        let mut pooled = dev.zeros(num_new * hd);
        let (table_kv, table_gate) = (dev.put(table_kv), dev.put(table_gate));
        ops::compress(dev, &table_kv, &table_gate, &w.ape, &token_idx, shape, &mut pooled);
        let mut entries = dev.zeros(num_new * hd);
        ops::rms_norm(dev, &pooled, &w.norm, pass.eps(), &mut entries);
        let rope_dim = pass.model.config.qk_rope_head_dim;
        let freqs = pass.model.rope_for(ratio);
        ops::rope(dev, &mut entries, &dev.put(positions), hd, freqs, false);
        let sem = pass.model.semantics;
        // KV entries: the FP8 round trip on the non-RoPE dims; indexer keys: the Hadamard rotation and the FP4 round trip.
        match kind {
            EntryKind::Kv if sem.kv_fp8_round_trip => ops::act_quant(dev, &mut entries, hd, hd - rope_dim, 64),
            EntryKind::Index if sem.indexer_fp4_round_trip => {
                ops::hadamard(dev, &mut entries, hd);
                ops::fp4_round_trip(dev, &mut entries, hd);
            }
            _ => {}
        }
        let entries = entries.into_vec(dev);
        let (section, floats) = (pass.model.layout.section(layer_idx, kind), pass.model.layout.floats);
        let mut offset = 0;
        for (g, &n) in new_per_group.iter().enumerate() {
            let seq = pass.groups[g].seq;
            let first = state(cache, pass, g, layer_idx, kind).num_entries;
            for i in 0..n {
                let value = &entries[(offset + i) * hd..(offset + i + 1) * hd];
                cache.store.put(&cache.tables[&seq], section, first + i, value, floats);
            }
            state(cache, pass, g, layer_idx, kind).num_entries += n;
            offset += n;
        }
    }
    for (g, group) in pass.groups.iter().enumerate() {
        let end = group.start + group.rows.len() as u32;
        state(cache, pass, g, layer_idx, kind).trim(end, ratio);
    }
}
