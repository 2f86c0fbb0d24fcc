//! Packs every FP8 and MXFP4 weight the CPU's act-quantised GEMMs read into 16-row groups at load, so no pass pays for it.

use tensorfold_kernels::cpu::{Packing, packing_pays};

use super::Dsv4Model;
use crate::dsv4::weights::{Attention, Block, Fp8, Mxfp4};

/// One weight the CPU GEMMs read packed.
enum Weight<'a> {
    Fp8(&'a Fp8),
    Mxfp4(&'a Mxfp4),
}

impl Weight<'_> {
    /// Bytes of the row layout it is packed from.
    fn source(&self) -> u64 {
        match self {
            Weight::Fp8(w) => (w.codes.len() + w.scales.len()) as u64,
            Weight::Mxfp4(w) => (w.packed.len() + w.scales.len()) as u64,
        }
    }

    /// Its format, for `packing_pays`.
    fn format(&self) -> Packing {
        match self {
            Weight::Fp8(_) => Packing::Fp8,
            Weight::Mxfp4(_) => Packing::Mxfp4,
        }
    }

    /// Packs it (once); the bytes its copy holds.
    fn pack(&self) -> u64 {
        match self {
            Weight::Fp8(w) => {
                w.cpu_groups();
                w.groups_held()
            }
            Weight::Mxfp4(w) => {
                w.cpu_groups();
                w.groups_held()
            }
        }
    }
}

/// The FP8 weights `fp8_gemm` reads in one layer's attention (`wo_a` goes through `dequant_gemm`).
fn attention<'a>(a: &'a Attention, out: &mut Vec<Weight<'a>>) {
    out.extend([&a.wq_a, &a.wq_b, &a.wkv, &a.wo_b].map(Weight::Fp8));
    if let Some(i) = &a.indexer {
        out.push(Weight::Fp8(&i.wq_b));
    }
}

/// A block's weights that the CPU reads packed.
fn block<'a>(b: &'a Block, out: &mut Vec<Weight<'a>>) {
    attention(&b.attn, out);
    for e in &b.ffn.experts {
        out.extend([&e.w1, &e.w2, &e.w3].map(Weight::Mxfp4));
    }
    if let Some(s) = &b.ffn.shared {
        out.extend([&s.w1, &s.w2, &s.w3].map(Weight::Fp8));
    }
}

impl Dsv4Model {
    /// Packs the weights the CPU's act-quantised GEMMs read, on `threads` threads (none where the semantics skip act_quant or packing does not pay); the bytes the copies hold.
    pub fn pack_for_cpu(&self, threads: usize) -> u64 {
        if !self.semantics.act_quant_gemm_inputs {
            return 0;
        }
        let mut all = Vec::new();
        for b in &self.weights.layers {
            block(b, &mut all);
        }
        for m in &self.weights.mtp {
            block(&m.block, &mut all);
            all.extend([&m.e_proj, &m.h_proj].map(Weight::Fp8));
        }
        all.retain(|w| packing_pays(w.format()));
        if all.is_empty() {
            return 0;
        }
        let bar = crate::progress::bytes(all.iter().map(Weight::source).sum(), "packing weights for the CPU");
        let pack = |w: &Weight<'_>| {
            let held = w.pack();
            bar.inc(w.source());
            held
        };
        let per = all.len().div_ceil(threads.max(1)).max(1);
        let packed = std::thread::scope(|s| {
            let parts: Vec<_> = all
                .chunks(per)
                .map(|part| s.spawn(|| part.iter().map(pack).sum::<u64>()))
                .collect();
            parts
                .into_iter()
                .map(|p| p.join().expect("packing threads do not panic"))
                .sum()
        });
        bar.finish_and_clear();
        packed
    }
}
