//! Every registered kernel, one line each.

use crate::contract::Kernel;

/// All kernels the contract checks.
pub fn all() -> Vec<&'static dyn Kernel> {
    vec![
        &crate::rms_norm::RmsNorm,
        // group A: elementwise, norms, RoPE, quantisation round trips
        // group B: GEMMs
        // group C: mHC, routers, MoE join
        // group D: compressor, indexer, attention
        &crate::compress::Compress,
        &crate::index_scores::IndexScores,
        &crate::index_topk::IndexTopk,
        &crate::sparse_attn::SparseAttn,
    ]
}
