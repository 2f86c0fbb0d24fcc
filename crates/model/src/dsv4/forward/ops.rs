//! Each kernel the forward pass launches, on the pass's device: the CPU kernel, or its CUDA twin reading weights resident on the GPU.

use tensorfold_kernels::Faults;
use tensorfold_kernels::compress::CompressShape;
use tensorfold_kernels::dequant_gemm::WeightFormat;
use tensorfold_kernels::index_scores::IndexShape;
use tensorfold_kernels::sparse_attn::AttnShape;
use tensorfold_kernels::{
    act_quant as aq, bf16_gemm as bg, compress as cp, dequant_gemm as dg, embedding as em, fp4_round_trip as f4,
    fp8_gemm as f8, hadamard as hd, hash_router as hr, hc_head as hh, hc_mix as hm, hc_post as hpo, hc_pre as hpr,
    hc_split_sinkhorn as hs, head_rms_norm as hn, index_scores as is, index_topk as it, moe_join as mj,
    mxfp4_gemm as m4, rms_norm as rn, rope as rp, router as ro, sparse_attn as sa, swiglu as sw,
};

use super::device::{Device, ok, record};

const F: Faults = Faults::NONE;

/// Resident device copy of a model-owned array (weights, norms, RoPE frequencies): never a per-pass temporary.
macro_rules! res {
    ($c:expr, $host:expr) => {
        match $c.resident.get($c.gpu, $host) {
            Ok(d) => d,
            Err(e) => panic!("uploading a weight to the GPU failed: {e}"),
        }
    };
}

pub(crate) fn embedding(d: &Device, table: &[u8], dim: usize, ids: &[i32], out: &mut [f32]) {
    match d {
        Device::Cpu(l) => em::embedding(table, dim, ids, out, l, F),
        Device::Cuda(c) => {
            let t = res!(c, table);
            ok(
                "embedding",
                em::cuda::embedding_cuda(record(&em::cuda::KERNEL), &*t, dim, ids, out, F),
            );
        }
    }
}

pub(crate) fn hc_mix(d: &Device, x: &[f32], hc_fn: &[f32], hc_dim: usize, eps: f32, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => hm::hc_mix(x, hc_fn, hc_dim, eps, out, l, F),
        Device::Cuda(c) => {
            let w = res!(c, hc_fn);
            ok(
                "hc_mix",
                hm::cuda::hc_mix_cuda(record(&hm::cuda::KERNEL), x, &*w, hc_dim, eps, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_split_sinkhorn(
    d: &Device,
    mix: &[f32],
    scale: &[f32],
    base: &[f32],
    hc: usize,
    iters: usize,
    eps: f32,
    pre: &mut [f32],
    post: &mut [f32],
    comb: &mut [f32],
) {
    match d {
        Device::Cpu(l) => hs::hc_split_sinkhorn(mix, scale, base, hc, iters, eps, pre, post, comb, l, F),
        Device::Cuda(c) => {
            let (s, b) = (res!(c, scale), res!(c, base));
            let k = record(&hs::cuda::KERNEL);
            let r = hs::cuda::hc_split_sinkhorn_cuda(k, mix, &*s, &*b, hc, iters, eps, pre, post, comb, F);
            ok("hc_split_sinkhorn", r);
        }
    }
}

pub(crate) fn hc_pre(d: &Device, x: &[f32], pre: &[f32], hc: usize, dim: usize, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => hpr::hc_pre(x, pre, hc, dim, out, l, F),
        Device::Cuda(_) => ok(
            "hc_pre",
            hpr::cuda::hc_pre_cuda(record(&hpr::cuda::KERNEL), x, pre, hc, dim, out, F),
        ),
    }
}

pub(crate) fn rms_norm(d: &Device, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => rn::rms_norm(x, weight, eps, out, l, F),
        Device::Cuda(c) => {
            let w = res!(c, weight);
            ok(
                "rms_norm",
                rn::cuda::rms_norm_cuda(record(&rn::cuda::KERNEL), x, &*w, eps, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_post(
    d: &Device,
    f: &[f32],
    x: &[f32],
    post: &[f32],
    comb: &[f32],
    hc: usize,
    dim: usize,
    out: &mut [f32],
) {
    match d {
        Device::Cpu(l) => hpo::hc_post(f, x, post, comb, hc, dim, out, l, F),
        Device::Cuda(_) => {
            let k = record(&hpo::cuda::KERNEL);
            ok("hc_post", hpo::cuda::hc_post_cuda(k, f, x, post, comb, hc, dim, out, F));
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_head(
    d: &Device,
    x: &[f32],
    hc_fn: &[f32],
    base: &[f32],
    scale: f32,
    hc: usize,
    dim: usize,
    eps: f32,
    hc_eps: f32,
    out: &mut [f32],
) {
    match d {
        Device::Cpu(l) => hh::hc_head(x, hc_fn, base, scale, hc, dim, eps, hc_eps, out, l, F),
        Device::Cuda(c) => {
            let (w, b) = (res!(c, hc_fn), res!(c, base));
            let k = record(&hh::cuda::KERNEL);
            ok(
                "hc_head",
                hh::cuda::hc_head_cuda(k, x, &*w, &*b, scale, hc, dim, eps, hc_eps, out, F),
            );
        }
    }
}

pub(crate) fn bf16_gemm(d: &Device, x: &[f32], w: &[u16], n: usize, k: usize, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => bg::bf16_gemm(x, w, n, k, out, l, F),
        Device::Cuda(c) => {
            let wd = res!(c, w);
            ok(
                "bf16_gemm",
                bg::cuda::bf16_gemm_cuda(record(&bg::cuda::KERNEL), x, &*wd, n, k, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn fp8_gemm(d: &Device, x: &[f32], w: &[u8], scale: &[u8], n: usize, k: usize, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => f8::fp8_gemm(x, w, scale, n, k, out, l, F),
        Device::Cuda(c) => {
            let (wd, sd) = (res!(c, w), res!(c, scale));
            ok(
                "fp8_gemm",
                f8::cuda::fp8_gemm_cuda(record(&f8::cuda::KERNEL), x, &*wd, &*sd, n, k, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn dequant_gemm(
    d: &Device,
    x: &[f32],
    w: &[u8],
    scales: &[u8],
    format: WeightFormat,
    n: usize,
    k: usize,
    groups: usize,
    out: &mut [f32],
) {
    match d {
        Device::Cpu(l) => dg::dequant_gemm(x, w, scales, format, n, k, groups, out, l, F),
        Device::Cuda(c) => {
            let (wd, sd) = (res!(c, w), res!(c, scales));
            let r = dg::cuda::dequant_gemm_cuda(record(&dg::cuda::KERNEL), x, &*wd, &*sd, format, n, k, groups, out, F);
            ok("dequant_gemm", r);
        }
    }
}

pub(crate) fn mxfp4_gemm(d: &Device, x: &[f32], w: &[u8], scale: &[u8], n: usize, k: usize, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => m4::mxfp4_gemm(x, w, scale, n, k, out, l, F),
        Device::Cuda(c) => {
            let (wd, sd) = (res!(c, w), res!(c, scale));
            ok(
                "mxfp4_gemm",
                m4::cuda::mxfp4_gemm_cuda(record(&m4::cuda::KERNEL), x, &*wd, &*sd, n, k, out, F),
            );
        }
    }
}

pub(crate) fn head_rms_norm(d: &Device, q: &mut [f32], head_dim: usize, eps: f32) {
    match d {
        Device::Cpu(l) => hn::head_rms_norm(q, head_dim, eps, l, F),
        Device::Cuda(_) => {
            let x = q.to_vec();
            ok(
                "head_rms_norm",
                hn::cuda::head_rms_norm_cuda(record(&hn::cuda::KERNEL), &x, head_dim, eps, q, F),
            );
        }
    }
}

pub(crate) fn rope(d: &Device, x: &mut [f32], positions: &[i32], head_dim: usize, inv_freq: &[f32], inverse: bool) {
    match d {
        Device::Cpu(l) => rp::rope(x, positions, head_dim, inv_freq, inverse, l, F),
        Device::Cuda(c) => {
            let (xin, fd) = (x.to_vec(), res!(c, inv_freq));
            let k = record(&rp::cuda::KERNEL);
            ok(
                "rope",
                rp::cuda::rope_cuda(k, &xin, positions, head_dim, &*fd, inverse, x, F),
            );
        }
    }
}

pub(crate) fn act_quant(d: &Device, x: &mut [f32], row_len: usize, n: usize, block: usize) {
    match d {
        Device::Cpu(l) => aq::act_quant(x, row_len, n, block, l, F),
        Device::Cuda(_) => {
            let xin = x.to_vec();
            let k = record(&aq::cuda::KERNEL);
            ok("act_quant", aq::cuda::act_quant_cuda(k, &xin, row_len, n, block, x, F));
        }
    }
}

pub(crate) fn hadamard(d: &Device, x: &mut [f32], n: usize) {
    match d {
        Device::Cpu(l) => hd::hadamard(x, n, l, F),
        Device::Cuda(_) => {
            let xin = x.to_vec();
            ok(
                "hadamard",
                hd::cuda::hadamard_cuda(record(&hd::cuda::KERNEL), &xin, n, x, F),
            );
        }
    }
}

pub(crate) fn fp4_round_trip(d: &Device, x: &mut [f32], row_len: usize) {
    match d {
        Device::Cpu(l) => f4::fp4_round_trip(x, row_len, l, F),
        Device::Cuda(_) => {
            let xin = x.to_vec();
            let k = record(&f4::cuda::KERNEL);
            ok("fp4_round_trip", f4::cuda::fp4_round_trip_cuda(k, &xin, row_len, x, F));
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn compress(
    d: &Device,
    kv: &[f32],
    gate: &[f32],
    ape: &[f32],
    token_idx: &[i32],
    shape: CompressShape,
    out: &mut [f32],
) {
    match d {
        Device::Cpu(l) => cp::compress(kv, gate, ape, token_idx, shape, out, l, F),
        Device::Cuda(c) => {
            let a = res!(c, ape);
            let k = record(&cp::cuda::KERNEL);
            ok(
                "compress",
                cp::cuda::compress_cuda(k, kv, gate, &*a, token_idx, shape, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn index_scores(
    d: &Device,
    q: &[f32],
    w: &[f32],
    key_range: &[i32],
    keys: &[f32],
    shape: IndexShape,
    out: &mut [f32],
) {
    match d {
        Device::Cpu(l) => is::index_scores(q, w, key_range, keys, shape, out, l, F),
        Device::Cuda(_) => {
            let k = record(&is::cuda::KERNEL);
            ok(
                "index_scores",
                is::cuda::index_scores_cuda(k, q, w, key_range, keys, shape, out, F),
            );
        }
    }
}

pub(crate) fn index_topk(d: &Device, scores: &[f32], num_visible: &[i32], top_k: usize, out: &mut [i32]) {
    match d {
        Device::Cpu(l) => it::index_topk(scores, num_visible, top_k, out, l, F),
        Device::Cuda(_) => {
            let k = record(&it::cuda::KERNEL);
            ok(
                "index_topk",
                it::cuda::index_topk_cuda(k, scores, num_visible, top_k, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn sparse_attn(
    d: &Device,
    q: &[f32],
    idx: &[i32],
    kv: &[f32],
    sink: &[f32],
    shape: AttnShape,
    out: &mut [f32],
) {
    match d {
        Device::Cpu(l) => sa::sparse_attn(q, idx, kv, sink, shape, out, l, F),
        Device::Cuda(c) => {
            let s = res!(c, sink);
            let k = record(&sa::cuda::KERNEL);
            ok(
                "sparse_attn",
                sa::cuda::sparse_attn_cuda(k, q, idx, kv, &*s, shape, out, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn router(
    d: &Device,
    logits: &[f32],
    bias: &[f32],
    k: usize,
    scale: f32,
    idx: &mut [i32],
    weights: &mut [f32],
) {
    match d {
        Device::Cpu(l) => ro::router(logits, bias, k, scale, idx, weights, l, F),
        Device::Cuda(c) => {
            let b = res!(c, bias);
            let r = record(&ro::cuda::KERNEL);
            ok(
                "router",
                ro::cuda::router_cuda(r, logits, &*b, k, scale, idx, weights, F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hash_router(
    d: &Device,
    logits: &[f32],
    token_ids: &[i32],
    tid2eid: &[i32],
    num_experts: usize,
    k: usize,
    scale: f32,
    idx: &mut [i32],
    weights: &mut [f32],
) {
    match d {
        Device::Cpu(l) => hr::hash_router(logits, token_ids, tid2eid, num_experts, k, scale, idx, weights, l, F),
        Device::Cuda(c) => {
            let t = res!(c, tid2eid);
            let r = record(&hr::cuda::KERNEL);
            let res = hr::cuda::hash_router_cuda(r, logits, token_ids, &*t, num_experts, k, scale, idx, weights, F);
            ok("hash_router", res);
        }
    }
}

pub(crate) fn swiglu(d: &Device, gate: &[f32], up: &[f32], route: &[f32], limit: f32, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => sw::swiglu(gate, up, route, limit, out, l, F),
        Device::Cuda(_) => ok(
            "swiglu",
            sw::cuda::swiglu_cuda(record(&sw::cuda::KERNEL), gate, up, route, limit, out, F),
        ),
    }
}

pub(crate) fn moe_join(d: &Device, routed: &[f32], shared: &[f32], k: usize, dim: usize, out: &mut [f32]) {
    match d {
        Device::Cpu(l) => mj::moe_join(routed, shared, k, dim, out, l, F),
        Device::Cuda(_) => ok(
            "moe_join",
            mj::cuda::moe_join_cuda(record(&mj::cuda::KERNEL), routed, shared, k, dim, out, F),
        ),
    }
}
