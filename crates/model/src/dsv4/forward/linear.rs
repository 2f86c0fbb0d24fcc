//! Linear layers of the forward pass: which registered GEMM kernel each weight format and semantics uses.

use tensorfold_kernels::Faults;
use tensorfold_kernels::bf16_gemm::bf16_gemm;
use tensorfold_kernels::dequant_gemm::{WeightFormat, dequant_gemm};
use tensorfold_kernels::fp8_gemm::fp8_gemm;
use tensorfold_kernels::mxfp4_gemm::mxfp4_gemm;

use super::Pass;
use crate::dsv4::weights::{Bf16, Fp8, Mxfp4};

fn output(x: &[f32], in_dim: usize, out_dim: usize) -> Vec<f32> {
    vec![0f32; x.len() / in_dim * out_dim]
}

/// FP8 e4m3 weight with 128x128 e8m0 block scales: activations act_quant'ed (official) or exact (transformers).
pub(crate) fn fp8(pass: &Pass<'_>, x: &[f32], w: &Fp8) -> Vec<f32> {
    let (n, k, l) = (w.out_dim, w.in_dim, &pass.launch);
    let mut out = output(x, k, n);
    if pass.model.semantics.act_quant_gemm_inputs {
        fp8_gemm(x, &w.codes, &w.scales, n, k, &mut out, l, Faults::NONE);
    } else {
        dequant_gemm(
            x,
            &w.codes,
            &w.scales,
            WeightFormat::Fp8Block,
            n,
            k,
            1,
            &mut out,
            l,
            Faults::NONE,
        );
    }
    out
}

/// MXFP4 weight (routed experts).
pub(crate) fn mxfp4(pass: &Pass<'_>, x: &[f32], w: &Mxfp4) -> Vec<f32> {
    let (n, k, l) = (w.out_dim, w.in_dim, &pass.launch);
    let mut out = output(x, k, n);
    if pass.model.semantics.act_quant_gemm_inputs {
        mxfp4_gemm(x, &w.packed, &w.scales, n, k, &mut out, l, Faults::NONE);
    } else {
        dequant_gemm(
            x,
            &w.packed,
            &w.scales,
            WeightFormat::Mxfp4,
            n,
            k,
            1,
            &mut out,
            l,
            Faults::NONE,
        );
    }
    out
}

/// bf16 weight: unquantised f32 activations in both semantics.
pub(crate) fn bf16(pass: &Pass<'_>, x: &[f32], w: &Bf16) -> Vec<f32> {
    let mut out = output(x, w.in_dim, w.out_dim);
    bf16_gemm(x, w.words(), w.out_dim, w.in_dim, &mut out, &pass.launch, Faults::NONE);
    out
}

/// DeepSeek V4's grouped output projection: group `i` of `x` against rows `i*out/g..` of `w`; DeepSeek's code dequantises `wo_a` and multiplies unquantised activations, so both semantics use the exact path.
pub(crate) fn grouped(pass: &Pass<'_>, x: &[f32], w: &Fp8, groups: usize) -> Vec<f32> {
    let (n, k, l) = (w.out_dim, w.in_dim, &pass.launch);
    let mut out = output(x, k * groups, n);
    dequant_gemm(
        x,
        &w.codes,
        &w.scales,
        WeightFormat::Fp8Block,
        n,
        k,
        groups,
        &mut out,
        l,
        Faults::NONE,
    );
    out
}
