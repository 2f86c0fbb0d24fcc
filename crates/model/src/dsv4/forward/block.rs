//! One transformer block: two mHC-wrapped sub-blocks, attention then the mixture of experts.

use super::Pass;
use super::{attention, moe, ops};
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv4::weights::{Block, Hc};

/// The mHC mapping of one sub-block: `y = pre . X` (normed) in, `X' = post * f + C^T X` out.
struct Mapping {
    post: Vec<f32>, // [rows, hc]
    comb: Vec<f32>, // [rows, hc, hc]
}

fn hc_in(pass: &Pass<'_>, hc: &Hc, norm: &[f32], x: &[f32]) -> (Vec<f32>, Mapping) {
    let c = &pass.model.config;
    let (rows, n, d) = (pass.rows(), c.hc_mult, c.hidden_size);
    let width = (2 + n) * n;
    let mut mix = vec![0f32; rows * width];
    ops::hc_mix(&pass.device, x, &hc.fn_, n * d, pass.eps(), &mut mix);
    let (mut pre, mut post, mut comb) = (vec![0f32; rows * n], vec![0f32; rows * n], vec![0f32; rows * n * n]);
    ops::hc_split_sinkhorn(
        &pass.device,
        &mix,
        &hc.scale,
        &hc.base,
        n,
        c.hc_sinkhorn_iters,
        c.hc_eps as f32,
        &mut pre,
        &mut post,
        &mut comb,
    );
    let mut y = vec![0f32; rows * d];
    ops::hc_pre(&pass.device, x, &pre, n, d, &mut y);
    let mut yn = vec![0f32; rows * d];
    ops::rms_norm(&pass.device, &y, norm, pass.eps(), &mut yn);
    (yn, Mapping { post, comb })
}

fn hc_out(pass: &Pass<'_>, m: &Mapping, f_out: &[f32], x: &[f32]) -> Vec<f32> {
    let c = &pass.model.config;
    let mut out = vec![0f32; x.len()];
    ops::hc_post(
        &pass.device,
        f_out,
        x,
        &m.post,
        &m.comb,
        c.hc_mult,
        c.hidden_size,
        &mut out,
    );
    out
}

/// Runs block `layer_idx` over the streams `x` `[rows, hc, D]`.
pub(crate) fn block(pass: &Pass<'_>, layer_idx: usize, w: &Block, x: &[f32], cache: &mut Dsv4Cache) -> Vec<f32> {
    let (y, m) = hc_in(pass, &w.hc_attn, &w.attn_norm, x);
    let f = attention::attention(pass, layer_idx, &w.attn, &y, cache);
    let x = hc_out(pass, &m, &f, x);
    let (y, m) = hc_in(pass, &w.hc_ffn, &w.ffn_norm, &x);
    let f = moe::moe(pass, &w.ffn, &y);
    hc_out(pass, &m, &f, &x)
}
