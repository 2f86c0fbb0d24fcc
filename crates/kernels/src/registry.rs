//! Every registered kernel, one line each.

use crate::contract::Kernel;

/// All kernels the contract checks.
pub fn all() -> Vec<&'static dyn Kernel> {
    vec![
        &crate::rms_norm::RmsNorm,
        // group A: elementwise, norms, RoPE, quantisation round trips
        &crate::act_quant::ActQuant,
        &crate::embedding::Embedding,
        &crate::fp4_round_trip::Fp4RoundTrip,
        &crate::hadamard::Hadamard,
        &crate::head_rms_norm::HeadRmsNorm,
        &crate::rope::Rope,
        &crate::swiglu::Swiglu,
        // group B: GEMMs
        // group C: mHC, routers, MoE join
        // group D: compressor, indexer, attention
    ]
}
