//! Every registered kernel, one line each.

use crate::contract::Kernel;

/// All kernels the contract checks.
pub fn all() -> Vec<&'static dyn Kernel> {
    vec![
        &crate::rms_norm::RmsNorm,
        &crate::rms_norm_quant::RmsNormQuant,
        &crate::swiglu_quant::SwigluQuant,
        // group A: elementwise, norms, RoPE, quantisation round trips
        &crate::act_quant::ActQuant,
        &crate::embedding::Embedding,
        &crate::engram_gate::EngramGate,
        &crate::engram_hash::EngramHash,
        &crate::engram_lookup::EngramLookup,
        &crate::fp4_round_trip::Fp4RoundTrip,
        &crate::nvfp4_round_trip::Nvfp4RoundTrip,
        &crate::hadamard::Hadamard,
        &crate::head_rms_norm::HeadRmsNorm,
        &crate::rope::Rope,
        &crate::swiglu::Swiglu,
        // group B: GEMMs
        &crate::fp8_gemm::Fp8Gemm,
        &crate::mxfp4_gemm::Mxfp4Gemm,
        &crate::bf16_gemm::Bf16Gemm,
        &crate::grouped_proj::GroupedProj,
        &crate::dequant_gemm::DequantGemm,
        // group C: mHC, routers, MoE join
        &crate::hc_mix::HcMix,
        &crate::hc_split_sinkhorn::HcSplitSinkhorn,
        &crate::hc_pre::HcPre,
        &crate::hc_pre_mix::HcPreMix,
        &crate::hc_post::HcPost,
        &crate::hc_head::HcHead,
        &crate::router::Router,
        &crate::hash_router::HashRouter,
        &crate::gather_rows::GatherRows,
        &crate::moe_join::MoeJoin,
        &crate::logits_argmax::LogitsArgmax,
        // group D: compressor, indexer, attention
        &crate::compress::Compress,
        &crate::index_scores::IndexScores,
        &crate::index_topk::IndexTopk,
        &crate::candidate_pool::CandidatePool,
        &crate::dspark_markov::DsparkMarkov,
        &crate::sparse_attn::SparseAttn,
    ]
}
