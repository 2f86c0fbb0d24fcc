//! One block with the lagged pre-mix: each sub-block reads the streams through the pre-mix computed one sub-block earlier.

use tensorfold_kernels::hc_mix::hc_mix;
use tensorfold_kernels::hc_post::hc_post;
use tensorfold_kernels::hc_pre::hc_pre;
use tensorfold_kernels::hc_split_sinkhorn::hc_split_sinkhorn;
use tensorfold_kernels::rms_norm::rms_norm;

use super::{Pass, Published, attention, moe};
use crate::dsv4::cache::Dsv4Cache;
use crate::dsv4::weights::Hc;
use crate::dsv41::weights::Block;

/// V4's mHC mixes of the streams `x`: (pre `[rows, hc]`, post `[rows, hc]`, comb `[rows, hc, hc]`).
fn mixes(pass: &Pass<'_>, hc: &Hc, x: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let c = &pass.model.config;
    let (rows, n, d) = (pass.rows(), c.hc_mult, c.hidden_size);
    let (l, f) = pass.faults();
    let mut mix = vec![0f32; rows * (2 + n) * n];
    hc_mix(x, &hc.fn_, n * d, pass.eps(), &mut mix, l, f);
    let (mut pre, mut post, mut comb) = (vec![0f32; rows * n], vec![0f32; rows * n], vec![0f32; rows * n * n]);
    hc_split_sinkhorn(
        &mix,
        &hc.scale,
        &hc.base,
        n,
        c.hc_sinkhorn_iters,
        c.hc_eps as f32,
        &mut pre,
        &mut post,
        &mut comb,
        l,
        f,
    );
    (pre, post, comb)
}

/// `RMSNorm(sum_i pi_i X_i)`: the lagged collapse of the streams, normed.
pub(crate) fn collapse(pass: &Pass<'_>, pi: &[f32], norm: &[f32], x: &[f32]) -> Vec<f32> {
    let c = &pass.model.config;
    let (rows, d) = (pass.rows(), c.hidden_size);
    let (l, f) = pass.faults();
    let mut y = vec![0f32; rows * d];
    hc_pre(x, pi, c.hc_mult, d, &mut y, l, f);
    let mut yn = vec![0f32; rows * d];
    rms_norm(&y, norm, pass.eps(), &mut yn, l, f);
    yn
}

/// `X_j <- post_j f + sum_i comb[i][j] X_i`.
fn post(pass: &Pass<'_>, post: &[f32], comb: &[f32], f_out: &[f32], x: &[f32]) -> Vec<f32> {
    let c = &pass.model.config;
    let mut out = vec![0f32; x.len()];
    let (l, f) = pass.faults();
    hc_post(f_out, x, post, comb, c.hc_mult, c.hidden_size, &mut out, l, f);
    out
}

/// Runs block `layer_idx` over the streams `x` `[rows, hc, D]` with incoming pre-mix `pi`; returns the streams and the next block's pre-mix.
pub(crate) fn block(
    pass: &Pass<'_>,
    layer_idx: usize,
    w: &Block,
    x: &[f32],
    pi: &[f32],
    cache: &mut Dsv4Cache,
    published: &mut Published,
) -> (Vec<f32>, Vec<f32>) {
    block_with(pass, w, x, pi, |u| {
        attention::attention(pass, layer_idx, &w.attn, u, cache, published)
    })
}

/// `block` with the attention `attn` of the normed collapsed rows.
pub(crate) fn block_with(
    pass: &Pass<'_>,
    w: &Block,
    x: &[f32],
    pi: &[f32],
    attn: impl FnOnce(&[f32]) -> Vec<f32>,
) -> (Vec<f32>, Vec<f32>) {
    let (a_pi, a_post, a_comb) = mixes(pass, &w.hc_attn, x);
    let u = collapse(pass, pi, &w.attn_norm, x);
    let a = attn(&u);
    let x = post(pass, &a_post, &a_comb, &a, x);
    let (f_pi, f_post, f_comb) = mixes(pass, &w.hc_ffn, &x);
    let u = collapse(pass, &a_pi, &w.ffn_norm, &x);
    let f = moe::moe(pass, &w.ffn, &u);
    (post(pass, &f_post, &f_comb, &f, &x), f_pi)
}
