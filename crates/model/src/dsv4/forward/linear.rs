//! Linear layers of the forward pass: which registered GEMM kernel each weight format and semantics uses.

use tensorfold_kernels::dequant_gemm::WeightFormat;

use super::Pass;
use super::ops;
use crate::dsv4::weights::{Bf16, Fp8, Mxfp4};

fn output(x: &[f32], in_dim: usize, out_dim: usize) -> Vec<f32> {
    vec![0f32; x.len() / in_dim * out_dim]
}

/// FP8 e4m3 weight with 128x128 e8m0 block scales: activations act_quant'ed (official) or exact (transformers).
pub(crate) fn fp8(pass: &Pass<'_>, x: &[f32], w: &Fp8) -> Vec<f32> {
    let (n, k) = (w.out_dim, w.in_dim);
    let mut out = output(x, k, n);
    if pass.model.semantics.act_quant_gemm_inputs {
        ops::fp8_gemm(&pass.device, x, &w.codes, &w.scales, n, k, &mut out);
    } else {
        ops::dequant_gemm(
            &pass.device,
            x,
            &w.codes,
            &w.scales,
            WeightFormat::Fp8Block,
            n,
            k,
            1,
            &mut out,
        );
    }
    out
}

/// MXFP4 weight (routed experts).
pub(crate) fn mxfp4(pass: &Pass<'_>, x: &[f32], w: &Mxfp4) -> Vec<f32> {
    let (n, k) = (w.out_dim, w.in_dim);
    let mut out = output(x, k, n);
    if pass.model.semantics.act_quant_gemm_inputs {
        ops::mxfp4_gemm(&pass.device, x, &w.packed, &w.scales, n, k, &mut out);
    } else {
        ops::dequant_gemm(
            &pass.device,
            x,
            &w.packed,
            &w.scales,
            WeightFormat::Mxfp4,
            n,
            k,
            1,
            &mut out,
        );
    }
    out
}

/// bf16 weight: unquantised f32 activations in both semantics.
pub(crate) fn bf16(pass: &Pass<'_>, x: &[f32], w: &Bf16) -> Vec<f32> {
    let mut out = output(x, w.in_dim, w.out_dim);
    ops::bf16_gemm(&pass.device, x, w.words(), w.out_dim, w.in_dim, &mut out);
    out
}

/// DeepSeek V4's grouped output projection: group `i` of `x` against rows `i*out/g..` of `w`; DeepSeek's code dequantises `wo_a` and multiplies unquantised activations, so both semantics use the exact path.
pub(crate) fn grouped(pass: &Pass<'_>, x: &[f32], w: &Fp8, groups: usize) -> Vec<f32> {
    let (n, k) = (w.out_dim, w.in_dim);
    let mut out = output(x, k * groups, n);
    ops::dequant_gemm(
        &pass.device,
        x,
        &w.codes,
        &w.scales,
        WeightFormat::Fp8Block,
        n,
        k,
        groups,
        &mut out,
    );
    out
}
