//! TensorFold's kernels: one folder per kernel (float64 reference, CPU implementation, cases, controls) and the contract.

pub mod contract;
pub mod cpu;
pub mod faults;
pub mod registry;
pub mod rng;

pub mod rms_norm;
// group A: elementwise, norms, RoPE, quantisation round trips
// group B: GEMMs
pub mod bf16_gemm;
pub mod fp8_gemm;
pub(crate) mod gemm;
pub mod grouped_proj;
pub mod mxfp4_gemm;
// group C: mHC, routers, MoE join
// group D: compressor, indexer, attention

pub use faults::Faults;
