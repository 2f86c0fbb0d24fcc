//! Linear layers of the V4.1 forward pass: exact weight decode (bf16 words or MXFP4), f32 activations.

use tensorfold_kernels::Faults;
use tensorfold_kernels::bf16_gemm::bf16_gemm;
use tensorfold_kernels::dequant_gemm::{WeightFormat, dequant_gemm};

use super::Pass;
use crate::dsv4::weights::{Bf16, Mxfp4};
use crate::dsv41::weights::Dense;

fn output(x: &[f32], in_dim: usize, out_dim: usize) -> Vec<f32> {
    vec![0f32; x.len() / in_dim * out_dim]
}

/// A bf16 weight from the checkpoint.
pub(crate) fn bf16(pass: &Pass<'_>, x: &[f32], w: &Bf16) -> Vec<f32> {
    let mut out = output(x, w.in_dim, w.out_dim);
    bf16_gemm(x, w.words(), w.out_dim, w.in_dim, &mut out, &pass.launch, Faults::NONE);
    out
}

/// An FP8 32x32 weight decoded to bf16 at load.
pub(crate) fn dense(pass: &Pass<'_>, x: &[f32], w: &Dense) -> Vec<f32> {
    let mut out = output(x, w.in_dim, w.out_dim);
    bf16_gemm(x, &w.words, w.out_dim, w.in_dim, &mut out, &pass.launch, Faults::NONE);
    out
}

/// An MXFP4 weight (routed experts), decoded exactly.
pub(crate) fn mxfp4(pass: &Pass<'_>, x: &[f32], w: &Mxfp4) -> Vec<f32> {
    let mut out = output(x, w.in_dim, w.out_dim);
    dequant_gemm(
        x,
        &w.packed,
        &w.scales,
        WeightFormat::Mxfp4,
        w.out_dim,
        w.in_dim,
        1,
        &mut out,
        &pass.launch,
        Faults::NONE,
    );
    out
}

/// The grouped output projection: group `i` of `x` `[rows, groups * in]` against rows `i * out / groups..` of `w`.
pub(crate) fn grouped(pass: &Pass<'_>, x: &[f32], w: &Dense, groups: usize) -> Vec<f32> {
    let (k, n) = (w.in_dim, w.out_dim / groups);
    let rows = x.len() / (k * groups);
    let mut out = vec![0f32; rows * n * groups];
    for g in 0..groups {
        let xg: Vec<f32> = (0..rows)
            .flat_map(|r| x[(r * groups + g) * k..(r * groups + g + 1) * k].iter().copied())
            .collect();
        let mut yg = vec![0f32; rows * n];
        let wg = &w.words[g * n * k..(g + 1) * n * k];
        bf16_gemm(&xg, wg, n, k, &mut yg, &pass.launch, Faults::NONE);
        for r in 0..rows {
            out[(r * groups + g) * n..(r * groups + g + 1) * n].copy_from_slice(&yg[r * n..(r + 1) * n]);
        }
    }
    out
}
