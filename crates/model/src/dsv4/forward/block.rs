//! One transformer block: two mHC-wrapped sub-blocks, attention then the mixture of experts.

use super::Pass;
use tensorfold_kernels::cuda::Branch;

use super::act::Act;
use super::quant::{self, Quant};
use super::{attention, graph, moe, ops};
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv4::weights::{Block, Hc};

/// The mHC mapping of one sub-block: `y = pre . X` (normed) in, `X' = post * f + C^T X` out.
pub(crate) struct Mapping {
    pub post: Act, // [rows, hc]
    pub comb: Act, // [rows, hc, hc]
}

/// A sub-block's Sinkhorn passes beside the stream and the buffers they read and write: dropping it joins the branch, then frees them.
pub(crate) struct Sinkhorn {
    _branch: Option<Branch<'static>>,
    _bufs: (Act, Act),
}

/// mHC in: the sub-block's normed input `[rows, D]` from the streams `x`, its mapping (its Sinkhorn passes beside the stream on the GPU, joined by the caller before `post` or `comb` is read), and on the GPU its act_quant (`quant::rms_norm`).
pub(crate) fn hc_in(pass: &Pass<'_>, hc: &Hc, norm: &[f32], x: &Act) -> (Act, Mapping, Option<Quant>, Sinkhorn) {
    let c = &pass.model.config;
    let (rows, n, d) = (pass.rows(), c.hc_mult, c.hidden_size);
    let dev = &pass.device;
    let width = (2 + n) * n;
    let mut mix = dev.alloc(rows * width);
    ops::hc_mix(dev, x, &hc.fn_, n * d, pass.eps(), &mut mix);
    let (mut pre, mut post, mut comb) = (dev.alloc(rows * n), dev.alloc(rows * n), dev.alloc(rows * n * n));
    let (iters, hc_eps) = (c.hc_sinkhorn_iters, c.hc_eps as f32);
    let (branch, ()) = dev.beside(|| {
        let split = ops::Split {
            pre: &mut pre,
            post: &mut post,
            comb: &mut comb,
        };
        ops::hc_split_sinkhorn(dev, &mix, &hc.scale, &hc.base, n, iters, hc_eps, split);
    });
    let mut y = dev.alloc(rows * d);
    ops::hc_pre_mix(dev, x, &mix, &hc.scale, &hc.base, n, d, hc_eps, &mut y);
    let mut yn = dev.alloc(rows * d);
    let quant = quant::rms_norm(pass, &y, norm, &mut yn);
    let sinkhorn = Sinkhorn {
        _branch: branch,
        _bufs: (mix, pre),
    };
    (yn, Mapping { post, comb }, quant, sinkhorn)
}

/// mHC out into `into` (else a new buffer): the streams after the sub-block.
fn hc_out(pass: &Pass<'_>, m: &Mapping, f_out: &Act, x: &Act, into: Option<Act>) -> Act {
    let c = &pass.model.config;
    let mut out = into.unwrap_or_else(|| pass.device.alloc(x.len()));
    let (hc, d) = (c.hc_mult, c.hidden_size);
    ops::hc_post(&pass.device, f_out, x, &m.post, &m.comb, hc, d, &mut out);
    out
}

/// Runs block `layer_idx` over the streams `x` `[rows, hc, D]`.
pub(crate) fn block(pass: &Pass<'_>, layer_idx: usize, w: &Block, x: &Act, cache: &mut Dsv4Cache) -> Act {
    let front = graph::front(pass, layer_idx, w, x);
    pass.device.mark(|| format!("layer {layer_idx} front"));
    let (f, m) = attention::attention(pass, layer_idx, &w.attn, front, cache);
    // The streams go straight into the MoE graph's input where it has one.
    let x = hc_out(pass, &m, &f, x, graph::ffn_input(pass, w, x.len()));
    pass.device.mark(|| format!("layer {layer_idx} attention"));
    let out = graph::ffn(pass, w, &x);
    pass.device.mark(|| format!("layer {layer_idx} moe"));
    out
}

/// Block `w`'s second sub-block over the streams `x`: the mixture of experts in its mHC mapping.
pub(crate) fn ffn(pass: &Pass<'_>, w: &Block, x: &Act) -> Act {
    let (y, m, quant, sinkhorn) = hc_in(pass, &w.hc_ffn, &w.ffn_norm, x);
    let f = moe::moe(pass, &w.ffn, &y, quant.as_ref());
    drop(sinkhorn);
    hc_out(pass, &m, &f, x, None)
}
