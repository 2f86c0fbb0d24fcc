//! TensorFold's kernels: one folder per kernel (float64 reference, CPU implementation, cases, controls) and the contract.

pub mod contract;
pub mod cpu;
pub mod faults;
pub mod registry;
pub mod rng;

pub mod rms_norm;
// group A: elementwise, norms, RoPE, quantisation round trips
// group B: GEMMs
// group C: mHC, routers, MoE join
// group D: compressor, indexer, attention
pub mod compress;
pub mod index_scores;
pub mod index_topk;
pub mod sparse_attn;

pub use faults::Faults;
