//! Feeds a batch's rows into each sequence's compressor and computes the entries they finish; the host state follows at the end of the pass.

use tensorfold_kernels::compress::CompressShape;

use super::front::CompRows;
use super::pending::{Fresh, Pending, state};
use super::table::{Table, Which};
use super::{Pass, ops};
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv4::weights::Compressor;

/// Feeds the projected `rows` to the compressor of `kind` and computes the entries they finish; both wait in the pass's deferred writes.
pub(crate) fn step(
    pass: &Pass<'_>,
    layer_idx: usize,
    w: &Compressor,
    rows: CompRows,
    cache: &mut Dsv4Cache,
    kind: EntryKind,
) {
    let dev = &pass.device;
    let (ratio, hd) = (w.ratio, w.head_dim);
    let shape = CompressShape {
        ratio,
        head_dim: hd,
        overlap: ratio == 4,
    };
    let width = shape.width();
    let CompRows { kv, gate } = rows;
    // Table rows: each group's held rows, then its new ones; only the entries the rows finish read them.
    let (mut token_idx, mut positions, mut counts, mut first_row) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for (g, group) in pass.groups.iter().enumerate() {
        let st = state(cache, pass, g, layer_idx, kind);
        let base = first_row as i64 - st.first_pos as i64;
        first_row += st.kv.len() / width + group.rows.len();
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
        counts.push(done_after - done_before);
    }
    let fresh = (!positions.is_empty()).then(|| {
        let num_new = positions.len();
        let (wk, wg) = match kind {
            EntryKind::Kv => (Which::CompressorKv, Which::CompressorGate),
            EntryKind::Index => (Which::IndexCompressorKv, Which::IndexCompressorGate),
        };
        let (mut table_kv, mut table_gate) = (Table::new(width, layer_idx, wk), Table::new(width, layer_idx, wg));
        for (g, group) in pass.groups.iter().enumerate() {
            let st = state(cache, pass, g, layer_idx, kind);
            table_kv.host_rows(&st.kv);
            table_gate.host_rows(&st.gate);
            table_kv.pass_rows(&group.rows);
            table_gate.pass_rows(&group.rows);
        }
        let (table_kv, table_gate) = (table_kv.finish(pass, Some(&kv)), table_gate.finish(pass, Some(&gate)));
        let mut pooled = dev.alloc(num_new * hd);
        ops::compress(dev, &table_kv, &table_gate, &w.ape, &token_idx, shape, &mut pooled);
        let mut entries = dev.alloc(num_new * hd);
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
        Fresh { entries, counts }
    });
    pass.defer(Pending::Compressor {
        layer: layer_idx,
        kind,
        ratio,
        kv,
        gate,
        fresh,
    });
}
