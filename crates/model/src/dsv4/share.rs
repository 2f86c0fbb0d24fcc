//! One rank's share of the weights: rank 0 keeps the dense layers and its routed experts, every other rank only its routed experts and the attention sinks of its heads.

use crate::checkpoint::MappedBytes;
use crate::dsv4::forward::parallel::owned;
use crate::dsv4::weights::{Attention, Bf16, Block, Compressor, Dsv4Weights, Fp8, Hc, Moe, Mxfp4};

/// Visits every weight a rank may drop: mapped views and host vectors.
trait Held {
    /// Bytes this weight holds.
    fn held(&self) -> u64;
    /// Drops the weight's bytes, leaving its shape.
    fn drop_bytes(&mut self);
}

impl Held for MappedBytes {
    fn held(&self) -> u64 {
        self.len() as u64
    }
    fn drop_bytes(&mut self) {
        *self = self.emptied();
    }
}

impl Held for Vec<f32> {
    fn held(&self) -> u64 {
        (self.len() * 4) as u64
    }
    fn drop_bytes(&mut self) {
        *self = Vec::new();
    }
}

impl Held for Fp8 {
    fn held(&self) -> u64 {
        self.codes.held() + self.scales.held() + self.groups_held()
    }
    fn drop_bytes(&mut self) {
        self.codes.drop_bytes();
        self.scales.drop_bytes();
        self.drop_groups();
    }
}

impl Held for Mxfp4 {
    fn held(&self) -> u64 {
        self.packed.held() + self.scales.held() + self.groups_held()
    }
    fn drop_bytes(&mut self) {
        self.packed.drop_bytes();
        self.scales.drop_bytes();
        self.drop_groups();
    }
}

impl Held for Bf16 {
    fn held(&self) -> u64 {
        self.bytes.held()
    }
    fn drop_bytes(&mut self) {
        *self = Bf16::new(self.bytes.emptied(), self.out_dim, self.in_dim);
    }
}

impl Held for Hc {
    fn held(&self) -> u64 {
        self.fn_.held() + self.base.held() + self.scale.held()
    }
    fn drop_bytes(&mut self) {
        self.fn_.drop_bytes();
        self.base.drop_bytes();
        self.scale.drop_bytes();
    }
}

impl Held for Compressor {
    fn held(&self) -> u64 {
        self.wkv.held() + self.wgate.held() + self.ape.held() + self.norm.held()
    }
    fn drop_bytes(&mut self) {
        self.wkv.drop_bytes();
        self.wgate.drop_bytes();
        self.ape.drop_bytes();
        self.norm.drop_bytes();
    }
}

/// The attention's projections, norms, compressor and indexer: everything but the sinks, which every rank's heads need.
fn attention_parts(a: &mut Attention) -> Vec<&mut dyn Held> {
    let mut parts: Vec<&mut dyn Held> = vec![
        &mut a.wq_a,
        &mut a.q_norm,
        &mut a.wq_b,
        &mut a.wkv,
        &mut a.kv_norm,
        &mut a.wo_a,
        &mut a.wo_b,
    ];
    if let Some(c) = &mut a.compressor {
        parts.push(c);
    }
    if let Some(i) = &mut a.indexer {
        parts.push(&mut i.wq_b);
        parts.push(&mut i.weights_proj);
        parts.push(&mut i.compressor);
    }
    parts
}

/// The dense weights of a MoE layer: the gate and the shared expert.
fn moe_dense(m: &mut Moe) -> Vec<&mut dyn Held> {
    let mut parts: Vec<&mut dyn Held> = vec![&mut m.gate];
    if let Some(sh) = &mut m.shared {
        parts.extend([&mut sh.w1 as &mut dyn Held, &mut sh.w2, &mut sh.w3]);
    }
    parts
}

fn block_dense(b: &mut Block) -> Vec<&mut dyn Held> {
    let mut parts: Vec<&mut dyn Held> = vec![&mut b.attn_norm, &mut b.ffn_norm, &mut b.hc_attn, &mut b.hc_ffn];
    parts.extend(attention_parts(&mut b.attn));
    parts.extend(moe_dense(&mut b.ffn));
    parts
}

/// Every weight but the routed experts and the attention sinks.
fn dense(w: &mut Dsv4Weights) -> Vec<&mut dyn Held> {
    let mut parts: Vec<&mut dyn Held> = vec![&mut w.embed, &mut w.norm, &mut w.hc_head, &mut w.head];
    for b in &mut w.layers {
        parts.extend(block_dense(b));
    }
    for m in &mut w.mtp {
        parts.extend(block_dense(&mut m.block));
        parts.extend([
            &mut m.e_proj as &mut dyn Held,
            &mut m.h_proj,
            &mut m.enorm,
            &mut m.hnorm,
            &mut m.norm,
            &mut m.hc_head,
        ]);
    }
    parts
}

fn moes(w: &mut Dsv4Weights) -> Vec<&mut Moe> {
    let main = w.layers.iter_mut().map(|b| &mut b.ffn);
    main.chain(w.mtp.iter_mut().map(|m| &mut m.block.ffn)).collect()
}

/// What a rank holds after `keep_share`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareReport {
    pub rank: usize,
    pub ranks: usize,
    /// Weight bytes held before and after.
    pub total_bytes: u64,
    pub held_bytes: u64,
    /// The routed experts kept in every MoE layer.
    pub experts: std::ops::Range<usize>,
}

impl std::fmt::Display for ShareReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let dense = if self.rank == 0 { "the dense layers and " } else { "" };
        write!(
            f,
            "rank {} of {}: holds {:.2} MiB of {:.2} MiB of weights ({dense}routed experts {}..{} of each MoE layer)",
            self.rank,
            self.ranks,
            mib(self.held_bytes),
            mib(self.total_bytes),
            self.experts.start,
            self.experts.end
        )
    }
}

impl Dsv4Weights {
    /// Weight bytes these views and vectors hold.
    pub fn held_bytes(&mut self) -> u64 {
        let mut sum: u64 = dense(self).iter().map(|p| p.held()).sum();
        for m in moes(self) {
            sum += m
                .experts
                .iter()
                .map(|e| e.w1.held() + e.w2.held() + e.w3.held())
                .sum::<u64>();
        }
        sum + self.layers.iter().map(|b| b.attn.attn_sink.held()).sum::<u64>()
            + self.mtp.iter().map(|m| m.block.attn.attn_sink.held()).sum::<u64>()
    }

    /// Keeps rank `rank`'s share of `ranks` (see the module doc), dropping the rest; the routed experts split as `--tp` splits them.
    pub fn keep_share(&mut self, rank: usize, ranks: usize) -> ShareReport {
        let total_bytes = self.held_bytes();
        let mut experts = 0..0;
        for m in moes(self) {
            experts = owned(m.experts.len(), ranks, rank);
            for (e, x) in m.experts.iter_mut().enumerate().filter(|(e, _)| !experts.contains(e)) {
                let _ = e;
                x.w1.drop_bytes();
                x.w2.drop_bytes();
                x.w3.drop_bytes();
            }
        }
        if rank != 0 {
            for p in dense(self) {
                p.drop_bytes();
            }
        }
        ShareReport {
            rank,
            ranks,
            total_bytes,
            held_bytes: self.held_bytes(),
            experts,
        }
    }
}
