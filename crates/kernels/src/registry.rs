//! Every registered kernel, one line each.

use crate::contract::Kernel;

/// All kernels the contract checks.
pub fn all() -> Vec<&'static dyn Kernel> {
    vec![
        &crate::rms_norm::RmsNorm,
        // group A: elementwise, norms, RoPE, quantisation round trips
        // group B: GEMMs
        &crate::fp8_gemm::Fp8Gemm,
        &crate::mxfp4_gemm::Mxfp4Gemm,
        &crate::bf16_gemm::Bf16Gemm,
        &crate::grouped_proj::GroupedProj,
        // group C: mHC, routers, MoE join
        // group D: compressor, indexer, attention
    ]
}
