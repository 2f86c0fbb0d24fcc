//! TensorFold's kernels: one folder per kernel (float64 reference, CPU implementation, cases, controls) and the contract.

pub mod contract;
pub mod cpu;
pub mod cuda;
pub mod faults;
pub mod registry;
pub mod rng;

pub mod rms_norm;
pub mod rms_norm_quant;
// group A: elementwise, norms, RoPE, quantisation round trips
pub mod act_quant;
pub mod embedding;
pub mod engram_gate;
pub mod engram_hash;
pub mod engram_lookup;
pub mod fp4_round_trip;
pub mod hadamard;
pub mod head_rms_norm;
pub mod nvfp4_round_trip;
pub mod rope;
pub mod swiglu;
pub mod swiglu_quant;
// group B: GEMMs
pub mod bf16_gemm;
pub mod dequant_gemm;
pub mod fp8_gemm;
pub(crate) mod gemm;
pub mod grouped_proj;
pub mod mxfp4_gemm;
// group C: mHC, routers, MoE join
pub mod gather_rows;
pub mod hash_router;
pub mod hc_head;
pub mod hc_mix;
pub mod hc_post;
pub mod hc_pre;
pub mod hc_pre_mix;
pub mod hc_split_sinkhorn;
pub mod logits_argmax;
pub mod moe_join;
pub mod router;
// group D: compressor, indexer, attention
pub mod candidate_pool;
pub mod compress;
pub mod dspark_markov;
pub mod index_scores;
pub mod index_topk;
pub mod sparse_attn;

pub use faults::Faults;
