//! A KV source's compressor (ratio 1, or ratio 2 over pairs with a carried half pair) and, for key owners, the index keys of its entries.

use tensorfold_kernels::compress::{CompressShape, compress};
use tensorfold_kernels::fp4_round_trip::fp4_round_trip;
use tensorfold_kernels::nvfp4_round_trip::nvfp4_round_trip;
use tensorfold_kernels::rms_norm::rms_norm;
use tensorfold_kernels::rope::rope;

use super::{Pass, linear};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::{CompressorState, Dsv4Cache};
use crate::dsv41::weights::{Compressor, IndexKeys};

fn state<'c>(cache: &'c mut Dsv4Cache, pass: &Pass<'_>, g: usize, layer_idx: usize) -> &'c mut CompressorState {
    cache.seq_mut(pass.groups[g].seq, &pass.model.config).layers[layer_idx]
        .compressor
        .as_mut()
        .expect("a KV source has compressor state")
}

/// Appends the rows' projections to every sequence's compressor and stores the entries (and index keys) they finish.
pub(crate) fn step(
    pass: &Pass<'_>,
    layer_idx: usize,
    w: &Compressor,
    keys: Option<&IndexKeys>,
    x: &[f32],
    cache: &mut Dsv4Cache,
) {
    let c = &pass.model.config;
    let (ratio, hd) = (w.ratio, c.head_dim);
    let (l, f) = pass.faults();
    let kv = linear::bf16(pass, x, &w.wkv); // [rows, hd]
    let gate = match &w.wgate {
        Some(wg) => linear::bf16(pass, x, wg), // [rows, hd]
        None => vec![0f32; kv.len()],
    };
    let (mut table_kv, mut table_gate, mut token_idx, mut positions) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut new_per_group = Vec::new();
    for (g, group) in pass.groups.iter().enumerate() {
        let st = state(cache, pass, g, layer_idx);
        for &r in &group.rows {
            st.kv.extend_from_slice(&kv[r * hd..(r + 1) * hd]);
            st.gate.extend_from_slice(&gate[r * hd..(r + 1) * hd]);
        }
        let base = (table_kv.len() / hd) as i64 - st.first_pos as i64;
        table_kv.extend_from_slice(&st.kv);
        table_gate.extend_from_slice(&st.gate);
        let end = group.start as usize + group.rows.len();
        let (done_before, done_after) = (group.start as usize / ratio, end / ratio);
        for entry in done_before..done_after {
            token_idx.extend((0..ratio).map(|s| (base + (entry * ratio + s) as i64) as i32));
            positions.push((entry * ratio) as i32);
        }
        new_per_group.push(done_after - done_before);
    }
    let num_new = positions.len();
    if num_new > 0 {
        let mut pooled = vec![0f32; num_new * hd];
        if ratio == 1 {
            for (o, &t) in pooled.chunks_mut(hd).zip(&token_idx) {
                o.copy_from_slice(&table_kv[t as usize * hd..(t as usize + 1) * hd]);
            }
        } else {
            // The pair softmax of the gate per channel; V4.1 has no position bias, so `ape` is zero.
            let shape = CompressShape {
                ratio,
                head_dim: hd,
                overlap: false,
            };
            let ape = vec![0f32; ratio * hd];
            compress(&table_kv, &table_gate, &ape, &token_idx, shape, &mut pooled, l, f);
        }
        let mut normed = vec![0f32; num_new * hd]; // [new, hd], before RoPE
        rms_norm(&pooled, &w.norm, pass.eps(), &mut normed, l, f);
        let freqs = pass.model.rope_for(ratio);
        let index_keys = keys.map(|k| {
            let raw = linear::bf16(pass, &normed, &k.wk); // [new, ihd]
            let mut ik = vec![0f32; raw.len()];
            rms_norm(&raw, &k.k_norm, pass.eps(), &mut ik, l, f);
            rope(&mut ik, &positions, c.index_head_dim, freqs, false, l, f);
            fp4_round_trip(&mut ik, c.index_head_dim, l, f);
            ik
        });
        let mut entries = normed;
        rope(&mut entries, &positions, hd, freqs, false, l, f);
        nvfp4_round_trip(&mut entries, hd, l, f);
        let layout = &pass.model.layout;
        let mut offset = 0;
        for (g, &n) in new_per_group.iter().enumerate() {
            let seq = pass.groups[g].seq;
            let first = state(cache, pass, g, layer_idx).num_entries;
            for i in 0..n {
                let e = offset + i;
                let section = layout.section(layer_idx, EntryKind::Kv);
                cache.store.put(
                    &cache.tables[&seq],
                    section,
                    first + i,
                    &entries[e * hd..(e + 1) * hd],
                    layout.floats,
                );
                if let Some(ik) = &index_keys {
                    let (section, ihd) = (layout.section(layer_idx, EntryKind::Index), c.index_head_dim);
                    cache.store.put(
                        &cache.tables[&seq],
                        section,
                        first + i,
                        &ik[e * ihd..(e + 1) * ihd],
                        layout.floats,
                    );
                }
            }
            state(cache, pass, g, layer_idx).num_entries += n;
            offset += n;
        }
    }
    for (g, group) in pass.groups.iter().enumerate() {
        let end = group.start + group.rows.len() as u32;
        state(cache, pass, g, layer_idx).trim(end, ratio);
    }
}
