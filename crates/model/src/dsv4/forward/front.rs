//! A block's attention front, the part whose shapes repeat every decode round: mHC in, the normed rows' projections (queries, KV, compressor rows, indexer queries and weights).

use super::act::Act;
use super::block::{Mapping, hc_in};
use super::{Pass, linear, ops, quant};
use crate::dsv4::weights::{Block, Compressor};

/// A compressor's projected rows `[rows, width]`: KV and gate.
pub(crate) struct CompRows {
    pub kv: Act,
    pub gate: Act,
}

/// The indexer's front: its queries `[rows, ih * ihd]` (RoPE'd, rotated and FP4 round-tripped as the semantics say), head weights `[rows, ih]` and its compressor's rows.
pub(crate) struct IndexFront {
    pub iq: Act,
    pub iw: Act,
    pub comp: CompRows,
}

/// Everything the rest of a block's attention reads from its input streams.
pub(crate) struct Front {
    pub map: Mapping,
    /// Queries `[rows, H * hd]`, head-normed and RoPE'd.
    pub q: Act,
    /// This round's KV rows `[rows, hd]`, normed, RoPE'd (and FP8 round-tripped as the semantics say).
    pub kv: Act,
    pub comp: Option<CompRows>,
    pub index: Option<IndexFront>,
}

impl CompRows {
    /// Buffers for a compressor's rows over `rows` rows, allocated where the pass runs.
    fn alloc(pass: &Pass<'_>, w: &Compressor) -> CompRows {
        let rows = pass.rows();
        CompRows {
            kv: pass.device.alloc(rows * w.wkv.out_dim),
            gate: pass.device.alloc(rows * w.wgate.out_dim),
        }
    }

    /// Projects a compressor's rows from the normed rows `x` into these buffers.
    fn project(&mut self, pass: &Pass<'_>, w: &Compressor, x: &Act) {
        linear::bf16_into(pass, x, &w.wkv, &mut self.kv);
        linear::bf16_into(pass, x, &w.wgate, &mut self.gate);
    }
}

/// Block `w`'s (layer `layer_idx`) attention front over the streams `x` `[rows, hc, D]`.
pub(crate) fn front(pass: &Pass<'_>, layer_idx: usize, w: &Block, x: &Act) -> Front {
    let (y, map, yq, sinkhorn) = hc_in(pass, &w.hc_attn, &w.attn_norm, x);
    let m = pass.model;
    let (c, a) = (&m.config, &w.attn);
    let dev = &pass.device;
    let (hd, rope_dim) = (c.head_dim, c.qk_rope_head_dim);
    let freqs = m.rope_for(c.compress_ratio(layer_idx));

    // The KV rows (their projection too), the compressors' rows and the indexer's head weights run beside the queries.
    let mut kv = dev.alloc(pass.rows() * a.wkv.out_dim);
    let mut comp = a.compressor.as_ref().map(|w| CompRows::alloc(pass, w));
    let mut beside_index = a.indexer.as_ref().map(|idx| {
        (
            dev.alloc(pass.rows() * idx.weights_proj.out_dim),
            CompRows::alloc(pass, &idx.compressor),
        )
    });
    let (branch, ()) = dev.beside(|| {
        let kv_raw = quant::fp8(pass, &y, yq.as_ref(), &[&a.wkv]).pop().expect("wkv output"); // [rows, hd]
        ops::rms_norm(dev, &kv_raw, &a.kv_norm, pass.eps(), &mut kv);
        ops::rope(dev, &mut kv, &pass.pos, hd, freqs, false);
        if m.semantics.kv_fp8_round_trip {
            ops::act_quant(dev, &mut kv, hd, hd - rope_dim, 64);
        }
        if let (Some(w), Some(rows)) = (&a.compressor, &mut comp) {
            rows.project(pass, w, &y);
        }
        if let (Some(idx), Some((iw, rows))) = (&a.indexer, &mut beside_index) {
            linear::bf16_into(pass, &y, &idx.weights_proj, iw); // [rows, ih]
            rows.project(pass, &idx.compressor, &y);
        }
    });
    // Queued after the fork, so the query projection runs while the KV branch does.
    let qa = quant::fp8(pass, &y, yq.as_ref(), &[&a.wq_a])
        .pop()
        .expect("wq_a output"); // [rows, q_lora]

    let mut qr = dev.alloc(qa.len());
    let qrq = quant::rms_norm(pass, &qa, &a.q_norm, &mut qr);
    // The indexer's queries share the query rows' act_quant.
    let (mut q, iq) = match &a.indexer {
        Some(idx) => {
            let mut v = quant::fp8(pass, &qr, qrq.as_ref(), &[&a.wq_b, &idx.wq_b]);
            let iq = v.pop().expect("indexer wq_b output");
            (v.pop().expect("wq_b output"), Some(iq))
        }
        None => (
            quant::fp8(pass, &qr, qrq.as_ref(), &[&a.wq_b])
                .pop()
                .expect("wq_b output"),
            None,
        ),
    }; // [rows, H * hd], [rows, ih * ihd]
    ops::head_rms_norm(dev, &mut q, hd, pass.eps());
    ops::rope(dev, &mut q, &pass.pos, hd, freqs, false);
    let index = beside_index.zip(iq).map(|((iw, comp), mut iq)| {
        let ihd = c.index_head_dim;
        ops::rope(dev, &mut iq, &pass.pos, ihd, m.rope_for(4), false);
        if m.semantics.indexer_fp4_round_trip {
            ops::hadamard(dev, &mut iq, ihd);
            ops::fp4_round_trip(dev, &mut iq, ihd);
        }
        IndexFront { iq, iw, comp }
    });
    // The join: the process stream waits for the work beside it.
    drop((sinkhorn, branch));
    Front {
        map,
        q,
        kv,
        comp,
        index,
    }
}

impl Front {
    /// Its buffers in a fixed order: post, comb, q, kv, then the compressor's and the indexer's when the block has them.
    pub fn into_parts(self) -> Vec<Act> {
        let mut v = vec![self.map.post, self.map.comb, self.q, self.kv];
        if let Some(c) = self.comp {
            v.extend([c.kv, c.gate]);
        }
        if let Some(i) = self.index {
            v.extend([i.iq, i.iw, i.comp.kv, i.comp.gate]);
        }
        v
    }

    /// The front of block `w` from buffers in `into_parts`'s order.
    pub fn from_parts(w: &Block, parts: Vec<Act>) -> Front {
        let mut it = parts.into_iter();
        let mut next = || it.next().expect("a front part for each buffer the block has");
        let map = Mapping {
            post: next(),
            comb: next(),
        };
        let (q, kv) = (next(), next());
        let comp = w.attn.compressor.as_ref().map(|_| CompRows {
            kv: next(),
            gate: next(),
        });
        let index = w.attn.indexer.as_ref().map(|_| IndexFront {
            iq: next(),
            iw: next(),
            comp: CompRows {
                kv: next(),
                gate: next(),
            },
        });
        Front {
            map,
            q,
            kv,
            comp,
            index,
        }
    }
}
