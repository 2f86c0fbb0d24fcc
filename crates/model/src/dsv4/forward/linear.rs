//! Linear layers of the forward pass: which registered GEMM kernel each weight format and semantics uses.

use tensorfold_kernels::dequant_gemm::WeightFormat;

use super::Pass;
use super::act::Act;
use super::ops;
use crate::dsv4::weights::{Bf16, Fp8, Mxfp4};

fn output(pass: &Pass<'_>, x: &Act, in_dim: usize, out_dim: usize) -> Act {
    pass.device.alloc(x.len() / in_dim * out_dim)
}

/// FP8 e4m3 weight with 128x128 e8m0 block scales: activations act_quant'ed (official) or exact (transformers).
pub(crate) fn fp8(pass: &Pass<'_>, x: &Act, w: &Fp8) -> Act {
    let mut out = output(pass, x, w.in_dim, w.out_dim);
    fp8_into(pass, x, w, &mut out);
    out
}

/// `fp8` into `out`, which holds `rows * out_dim` values.
pub(crate) fn fp8_into(pass: &Pass<'_>, x: &Act, w: &Fp8, out: &mut Act) {
    let (n, k) = (w.out_dim, w.in_dim);
    if pass.model.semantics.act_quant_gemm_inputs {
        ops::fp8_gemm(&pass.device, x, w, out);
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
            out,
        );
    }
}

/// `fp8` of `x` against two weights of the same input width, act_quant'ing `x` once where the semantics quantise.
pub(crate) fn fp8_pair(pass: &Pass<'_>, x: &Act, a: &Fp8, b: &Fp8) -> (Act, Act) {
    if !pass.model.semantics.act_quant_gemm_inputs || a.in_dim != b.in_dim {
        return (fp8(pass, x, a), fp8(pass, x, b));
    }
    let k = a.in_dim;
    let (mut ya, mut yb) = (output(pass, x, k, a.out_dim), output(pass, x, k, b.out_dim));
    ops::fp8_gemm2(&pass.device, x, [a, b], k, [&mut ya, &mut yb]);
    (ya, yb)
}

/// MXFP4 weight (routed experts).
pub(crate) fn mxfp4(pass: &Pass<'_>, x: &Act, w: &Mxfp4) -> Act {
    let (n, k) = (w.out_dim, w.in_dim);
    let mut out = output(pass, x, k, n);
    if pass.model.semantics.act_quant_gemm_inputs {
        ops::mxfp4_gemm(&pass.device, x, w, &mut out);
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
pub(crate) fn bf16(pass: &Pass<'_>, x: &Act, w: &Bf16) -> Act {
    let mut out = output(pass, x, w.in_dim, w.out_dim);
    bf16_into(pass, x, w, &mut out);
    out
}

/// `bf16` into `out`, which holds `rows * out_dim` values.
pub(crate) fn bf16_into(pass: &Pass<'_>, x: &Act, w: &Bf16, out: &mut Act) {
    ops::bf16_gemm(&pass.device, x, w.words(), w.out_dim, w.in_dim, out);
}

/// DeepSeek V4's grouped output projection: group `i` of `x` against rows `i*out/g..` of `w`; DeepSeek's code dequantises `wo_a` and multiplies unquantised activations, so both semantics use the exact path.
pub(crate) fn grouped(pass: &Pass<'_>, x: &Act, w: &Fp8, groups: usize) -> Act {
    let (n, k) = (w.out_dim, w.in_dim);
    let mut out = output(pass, x, k * groups, n);
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
