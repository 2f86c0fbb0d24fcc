//! Each kernel the forward pass launches, on the pass's device: the CPU kernel, or its CUDA twin reading weights resident on the GPU.

use tensorfold_kernels::Faults;
use tensorfold_kernels::compress::CompressShape;
use tensorfold_kernels::dequant_gemm::WeightFormat;
use tensorfold_kernels::index_scores::IndexShape;
use tensorfold_kernels::sparse_attn::AttnShape;
use tensorfold_kernels::{
    act_quant as aq, bf16_gemm as bg, compress as cp, dequant_gemm as dg, embedding as em, fp4_round_trip as f4,
    fp8_gemm as f8, gather_rows as gr, hadamard as hd, hash_router as hr, hc_head as hh, hc_mix as hm, hc_post as hpo,
    hc_pre_mix as hpm, hc_split_sinkhorn as hs, head_rms_norm as hn, index_scores as is, index_topk as it,
    logits_argmax as la, moe_join as mj, mxfp4_gemm as m4, rms_norm as rn, rope as rp, router as ro, sparse_attn as sa,
    swiglu as sw,
};

use super::act::Act;
use super::device::{Device, ok, record};
use crate::dsv4::weights::{Fp8, Mxfp4};
use tensorfold_kernels::cpu::CpuLaunch;

pub(crate) const F: Faults = Faults::NONE;

/// Resident device copy of a model-owned array (weights, norms, RoPE frequencies): never a per-pass temporary.
macro_rules! res {
    ($c:expr, $host:expr) => {
        match $c.resident.get($c.gpu, $host) {
            Ok(d) => d,
            Err(e) => panic!("uploading a weight to the GPU failed: {e}"),
        }
    };
}

pub(crate) fn embedding(d: &Device, table: &[u8], dim: usize, ids: &Act<i32>, out: &mut Act) {
    match d {
        Device::Cpu(l) => em::embedding(table, dim, ids.host(), out.host_mut(), l, F),
        Device::Cuda(c) => {
            let t = res!(c, table);
            let k = record(&em::cuda::KERNEL);
            ok(
                "embedding",
                em::cuda::embedding_cuda(k, &*t, dim, ids.input(), out.output(), F),
            );
        }
    }
}

/// Rows of `x` (`dim` values each) named by `idx`, into `out` `[idx.len(), dim]`.
pub(crate) fn gather_rows(d: &Device, x: &Act, dim: usize, idx: &Act<i32>, out: &mut Act) {
    match d {
        Device::Cpu(l) => gr::gather_rows(x.host(), dim, idx.host(), out.host_mut(), l, F),
        Device::Cuda(_) => {
            let k = record(&gr::cuda::KERNEL);
            ok(
                "gather_rows",
                gr::cuda::gather_rows_cuda(k, x.input(), dim, idx.input(), out.output(), F),
            );
        }
    }
}

pub(crate) fn hc_mix(d: &Device, x: &Act, hc_fn: &[f32], hc_dim: usize, eps: f32, out: &mut Act) {
    match d {
        Device::Cpu(l) => hm::hc_mix(x.host(), hc_fn, hc_dim, eps, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let w = res!(c, hc_fn);
            let k = record(&hm::cuda::KERNEL);
            ok(
                "hc_mix",
                hm::cuda::hc_mix_cuda(k, x.input(), &*w, hc_dim, eps, out.output(), F),
            );
        }
    }
}

/// The three outputs of `hc_split_sinkhorn`.
pub(crate) struct Split<'o> {
    pub pre: &'o mut Act,
    pub post: &'o mut Act,
    pub comb: &'o mut Act,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_split_sinkhorn(
    d: &Device,
    mix: &Act,
    scale: &[f32],
    base: &[f32],
    hc: usize,
    iters: usize,
    eps: f32,
    out: Split<'_>,
) {
    match d {
        Device::Cpu(l) => hs::hc_split_sinkhorn(
            mix.host(),
            scale,
            base,
            hc,
            iters,
            eps,
            out.pre.host_mut(),
            out.post.host_mut(),
            out.comb.host_mut(),
            l,
            F,
        ),
        Device::Cuda(c) => {
            let (s, b) = (res!(c, scale), res!(c, base));
            let k = record(&hs::cuda::KERNEL);
            let (pre, post, comb) = (out.pre.output(), out.post.output(), out.comb.output());
            let r = hs::cuda::hc_split_sinkhorn_cuda(k, mix.input(), &*s, &*b, hc, iters, eps, pre, post, comb, F);
            ok("hc_split_sinkhorn", r);
        }
    }
}

/// `hc_pre` with its gates made from the mix (`hc_split_sinkhorn`'s `pre`, the same bits), so it need not wait for the Sinkhorn passes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_pre_mix(
    d: &Device,
    x: &Act,
    mix: &Act,
    scale: &[f32],
    base: &[f32],
    hc: usize,
    dim: usize,
    eps: f32,
    out: &mut Act,
) {
    match d {
        Device::Cpu(l) => hpm::hc_pre_mix(x.host(), mix.host(), scale, base, hc, dim, eps, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let (s, b) = (res!(c, scale), res!(c, base));
            let k = record(&hpm::cuda::KERNEL);
            let r = hpm::cuda::hc_pre_mix_cuda(k, x.input(), mix.input(), &*s, &*b, hc, dim, eps, out.output(), F);
            ok("hc_pre_mix", r);
        }
    }
}

pub(crate) fn rms_norm(d: &Device, x: &Act, weight: &[f32], eps: f32, out: &mut Act) {
    match d {
        Device::Cpu(l) => rn::rms_norm(x.host(), weight, eps, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let w = res!(c, weight);
            let k = record(&rn::cuda::KERNEL);
            ok(
                "rms_norm",
                rn::cuda::rms_norm_cuda(k, x.input(), &*w, eps, out.output(), F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_post(d: &Device, f: &Act, x: &Act, post: &Act, comb: &Act, hc: usize, dim: usize, out: &mut Act) {
    match d {
        Device::Cpu(l) => hpo::hc_post(
            f.host(),
            x.host(),
            post.host(),
            comb.host(),
            hc,
            dim,
            out.host_mut(),
            l,
            F,
        ),
        Device::Cuda(_) => {
            let k = record(&hpo::cuda::KERNEL);
            let (fi, xi, pi, ci) = (f.input(), x.input(), post.input(), comb.input());
            ok(
                "hc_post",
                hpo::cuda::hc_post_cuda(k, fi, xi, pi, ci, hc, dim, out.output(), F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hc_head(
    d: &Device,
    x: &Act,
    hc_fn: &[f32],
    base: &[f32],
    scale: f32,
    hc: usize,
    dim: usize,
    eps: f32,
    hc_eps: f32,
    out: &mut Act,
) {
    match d {
        Device::Cpu(l) => hh::hc_head(x.host(), hc_fn, base, scale, hc, dim, eps, hc_eps, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let (w, b) = (res!(c, hc_fn), res!(c, base));
            let k = record(&hh::cuda::KERNEL);
            let r = hh::cuda::hc_head_cuda(k, x.input(), &*w, &*b, scale, hc, dim, eps, hc_eps, out.output(), F);
            ok("hc_head", r);
        }
    }
}

pub(crate) fn bf16_gemm(d: &Device, x: &Act, w: &[u16], n: usize, k: usize, out: &mut Act) {
    match d {
        Device::Cpu(l) => bg::bf16_gemm(x.host(), w, n, k, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let wd = res!(c, w);
            let r = record(&bg::cuda::KERNEL);
            ok(
                "bf16_gemm",
                bg::cuda::bf16_gemm_cuda(r, x.input(), &*wd, n, k, out.output(), F),
            );
        }
    }
}

/// `fp8_gemm` of `x` against `m`: on the CPU through its 16-row groups where this CPU packs them (the same bits).
pub(crate) fn fp8_gemm(d: &Device, x: &Act, m: &Fp8, out: &mut Act) {
    let (w, scale, n, k) = (&m.codes[..], &m.scales[..], m.out_dim, m.in_dim);
    match d {
        Device::Cpu(l) => match m.cpu_groups() {
            Some(p) => f8::fp8_gemm_packed(x.host(), p, out.host_mut(), &CpuLaunch { packed: true, ..*l }, F),
            None => f8::fp8_gemm(x.host(), w, scale, n, k, out.host_mut(), l, F),
        },
        Device::Cuda(c) => {
            let (wd, sd) = (res!(c, w), res!(c, scale));
            let r = record(&f8::cuda::KERNEL);
            ok(
                "fp8_gemm",
                f8::cuda::fp8_gemm_cuda(r, x.input(), &*wd, &*sd, n, k, out.output(), F),
            );
        }
    }
}

/// `fp8_gemm` of `x` against two weights of input width `k`, the activations act_quant'ed once on the GPU.
pub(crate) fn fp8_gemm2(d: &Device, x: &Act, w: [&Fp8; 2], k: usize, out: [&mut Act; 2]) {
    let Device::Cuda(c) = d else {
        for (w, out) in w.into_iter().zip(out) {
            fp8_gemm(d, x, w, out);
        }
        return;
    };
    let held: Vec<_> = w
        .iter()
        .map(|w| (res!(c, &w.codes[..]), res!(c, &w.scales[..])))
        .collect();
    let weights = held
        .iter()
        .zip(w)
        .zip(out)
        .map(|(((wd, sd), w), out)| ((&**wd).into(), (&**sd).into(), w.out_dim, out.output()))
        .collect();
    let r = record(&f8::cuda::KERNEL);
    ok("fp8_gemm", f8::cuda::fp8_gemms_cuda(r, x.input(), weights, k, F));
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn dequant_gemm(
    d: &Device,
    x: &Act,
    w: &[u8],
    scales: &[u8],
    format: WeightFormat,
    n: usize,
    k: usize,
    groups: usize,
    out: &mut Act,
) {
    match d {
        Device::Cpu(l) => dg::dequant_gemm(x.host(), w, scales, format, n, k, groups, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let (wd, sd) = (res!(c, w), res!(c, scales));
            let rec = record(&dg::cuda::KERNEL);
            let r = dg::cuda::dequant_gemm_cuda(rec, x.input(), &*wd, &*sd, format, n, k, groups, out.output(), F);
            ok("dequant_gemm", r);
        }
    }
}

/// `mxfp4_gemm` of `x` against `m`: on the CPU through its 16-row groups where this CPU packs them (the same bits).
pub(crate) fn mxfp4_gemm(d: &Device, x: &Act, m: &Mxfp4, out: &mut Act) {
    let (w, scale, n, k) = (&m.packed[..], &m.scales[..], m.out_dim, m.in_dim);
    match d {
        Device::Cpu(l) => match m.cpu_groups() {
            Some(p) => m4::mxfp4_gemm_packed(x.host(), p, out.host_mut(), &CpuLaunch { packed: true, ..*l }, F),
            None => m4::mxfp4_gemm(x.host(), w, scale, n, k, out.host_mut(), l, F),
        },
        Device::Cuda(c) => {
            let (wd, sd) = (res!(c, w), res!(c, scale));
            let r = record(&m4::cuda::KERNEL);
            ok(
                "mxfp4_gemm",
                m4::cuda::mxfp4_gemm_cuda(r, x.input(), &*wd, &*sd, n, k, out.output(), F),
            );
        }
    }
}

/// The input of an in-place kernel on the GPU: a device copy of the values it overwrites (the output starts as them too).
fn before(d: &Device, x: &Act) -> Act {
    x.duplicate(d)
}

pub(crate) fn head_rms_norm(d: &Device, q: &mut Act, head_dim: usize, eps: f32) {
    match d {
        Device::Cpu(l) => hn::head_rms_norm(q.host_mut(), head_dim, eps, l, F),
        Device::Cuda(_) => {
            let x = before(d, q);
            let k = record(&hn::cuda::KERNEL);
            ok(
                "head_rms_norm",
                hn::cuda::head_rms_norm_cuda(k, x.input(), head_dim, eps, q.output(), F),
            );
        }
    }
}

pub(crate) fn rope(d: &Device, x: &mut Act, positions: &Act<i32>, head_dim: usize, inv_freq: &[f32], inverse: bool) {
    match d {
        Device::Cpu(l) => rp::rope(x.host_mut(), positions.host(), head_dim, inv_freq, inverse, l, F),
        Device::Cuda(c) => {
            let (xin, fd) = (before(d, x), res!(c, inv_freq));
            let k = record(&rp::cuda::KERNEL);
            let r = rp::cuda::rope_cuda(
                k,
                xin.input(),
                positions.input(),
                head_dim,
                &*fd,
                inverse,
                x.output(),
                F,
            );
            ok("rope", r);
        }
    }
}

pub(crate) fn act_quant(d: &Device, x: &mut Act, row_len: usize, n: usize, block: usize) {
    match d {
        Device::Cpu(l) => aq::act_quant(x.host_mut(), row_len, n, block, l, F),
        Device::Cuda(_) => {
            let xin = before(d, x);
            let k = record(&aq::cuda::KERNEL);
            ok(
                "act_quant",
                aq::cuda::act_quant_cuda(k, xin.input(), row_len, n, block, x.output(), F),
            );
        }
    }
}

pub(crate) fn hadamard(d: &Device, x: &mut Act, n: usize) {
    match d {
        Device::Cpu(l) => hd::hadamard(x.host_mut(), n, l, F),
        Device::Cuda(_) => {
            let xin = before(d, x);
            let k = record(&hd::cuda::KERNEL);
            ok("hadamard", hd::cuda::hadamard_cuda(k, xin.input(), n, x.output(), F));
        }
    }
}

pub(crate) fn fp4_round_trip(d: &Device, x: &mut Act, row_len: usize) {
    match d {
        Device::Cpu(l) => f4::fp4_round_trip(x.host_mut(), row_len, l, F),
        Device::Cuda(_) => {
            let xin = before(d, x);
            let k = record(&f4::cuda::KERNEL);
            ok(
                "fp4_round_trip",
                f4::cuda::fp4_round_trip_cuda(k, xin.input(), row_len, x.output(), F),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn compress(
    d: &Device,
    kv: &Act,
    gate: &Act,
    ape: &[f32],
    token_idx: &[i32],
    shape: CompressShape,
    out: &mut Act,
) {
    match d {
        Device::Cpu(l) => cp::compress(kv.host(), gate.host(), ape, token_idx, shape, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let a = res!(c, ape);
            let k = record(&cp::cuda::KERNEL);
            let r = cp::cuda::compress_cuda(k, kv.input(), gate.input(), &*a, token_idx, shape, out.output(), F);
            ok("compress", r);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn index_scores(
    d: &Device,
    q: &Act,
    w: &Act,
    key_range: &[i32],
    keys: &Act,
    shape: IndexShape,
    out: &mut Act,
) {
    match d {
        Device::Cpu(l) => is::index_scores(q.host(), w.host(), key_range, keys.host(), shape, out.host_mut(), l, F),
        Device::Cuda(_) => {
            let k = record(&is::cuda::KERNEL);
            let r =
                is::cuda::index_scores_cuda(k, q.input(), w.input(), key_range, keys.input(), shape, out.output(), F);
            ok("index_scores", r);
        }
    }
}

/// Each row's top-k picks plus `offsets[r]`, written at `col..col + top_k` of `out`'s rows of `stride` values.
#[allow(clippy::too_many_arguments)]
pub(crate) fn index_topk(
    d: &Device,
    scores: &Act,
    num_visible: &[i32],
    top_k: usize,
    (stride, col): (usize, usize),
    offsets: &[i32],
    out: &mut Act<i32>,
) {
    let place = it::Place {
        stride,
        col,
        offsets: Some(offsets),
    };
    match d {
        Device::Cpu(l) => it::index_topk_placed(scores.host(), num_visible, top_k, place, out.host_mut(), l, F),
        Device::Cuda(_) => {
            let k = record(&it::cuda::KERNEL);
            let r = it::cuda::index_topk_placed_cuda(k, scores.input(), num_visible, top_k, place, out.output(), F);
            ok("index_topk", r);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn sparse_attn(
    d: &Device,
    q: &Act,
    idx: &Act<i32>,
    kv: &Act,
    sink: &[f32],
    shape: AttnShape,
    out: &mut Act,
) {
    match d {
        Device::Cpu(l) => sa::sparse_attn(q.host(), idx.host(), kv.host(), sink, shape, out.host_mut(), l, F),
        Device::Cuda(c) => {
            let s = res!(c, sink);
            let k = record(&sa::cuda::KERNEL);
            let r = sa::cuda::sparse_attn_cuda(k, q.input(), idx.input(), kv.input(), &*s, shape, out.output(), F);
            ok("sparse_attn", r);
        }
    }
}

/// The two outputs of a router: expert indices and weights.
pub(crate) struct Routed<'o> {
    pub idx: &'o mut Act<i32>,
    pub weights: &'o mut Act,
}

pub(crate) fn router(d: &Device, logits: &Act, bias: &[f32], k: usize, scale: f32, out: Routed<'_>) {
    match d {
        Device::Cpu(l) => ro::router(
            logits.host(),
            bias,
            k,
            scale,
            out.idx.host_mut(),
            out.weights.host_mut(),
            l,
            F,
        ),
        Device::Cuda(c) => {
            let b = res!(c, bias);
            let r = record(&ro::cuda::KERNEL);
            let res = ro::cuda::router_cuda(
                r,
                logits.input(),
                &*b,
                k,
                scale,
                out.idx.output(),
                out.weights.output(),
                F,
            );
            ok("router", res);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn hash_router(
    d: &Device,
    logits: &Act,
    token_ids: &Act<i32>,
    tid2eid: &[i32],
    num_experts: usize,
    k: usize,
    scale: f32,
    out: Routed<'_>,
) {
    match d {
        Device::Cpu(l) => hr::hash_router(
            logits.host(),
            token_ids.host(),
            tid2eid,
            num_experts,
            k,
            scale,
            out.idx.host_mut(),
            out.weights.host_mut(),
            l,
            F,
        ),
        Device::Cuda(c) => {
            let t = res!(c, tid2eid);
            let r = record(&hr::cuda::KERNEL);
            let (li, ti) = (logits.input(), token_ids.input());
            let (io, wo) = (out.idx.output(), out.weights.output());
            let res = hr::cuda::hash_router_cuda(r, li, ti, &*t, num_experts, k, scale, io, wo, F);
            ok("hash_router", res);
        }
    }
}

pub(crate) fn swiglu(d: &Device, gate: &Act, up: &Act, route: &Act, limit: f32, out: &mut Act) {
    match d {
        Device::Cpu(l) => sw::swiglu(gate.host(), up.host(), route.host(), limit, out.host_mut(), l, F),
        Device::Cuda(_) => {
            let k = record(&sw::cuda::KERNEL);
            let (g, u, r) = (gate.input(), up.input(), route.input());
            ok("swiglu", sw::cuda::swiglu_cuda(k, g, u, r, limit, out.output(), F));
        }
    }
}

pub(crate) fn moe_join(d: &Device, routed: &Act, shared: &Act, k: usize, dim: usize, out: &mut Act) {
    match d {
        Device::Cpu(l) => mj::moe_join(routed.host(), shared.host(), k, dim, out.host_mut(), l, F),
        Device::Cuda(_) => {
            let r = record(&mj::cuda::KERNEL);
            ok(
                "moe_join",
                mj::cuda::moe_join_cuda(r, routed.input(), shared.input(), k, dim, out.output(), F),
            );
        }
    }
}

/// Each `vocab`-wide row's greedy pick of `logits` (the sampler's rule), an f32 id a row.
pub(crate) fn logits_argmax(d: &Device, logits: &Act, vocab: usize) -> Act {
    let mut out = d.alloc(logits.len() / vocab);
    match d {
        Device::Cpu(l) => la::logits_argmax(logits.host(), vocab, out.host_mut(), l, F),
        Device::Cuda(_) => {
            let r = record(&la::cuda::KERNEL);
            ok(
                "logits_argmax",
                la::cuda::logits_argmax_cuda(r, logits.input(), vocab, out.output(), F),
            );
        }
    }
    out
}
