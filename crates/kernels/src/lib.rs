//! TensorFold's kernels: one folder per kernel (float64 reference, CPU implementation, cases, controls) and the contract.

pub mod contract;
pub mod cpu;
pub mod faults;
pub mod registry;
pub mod rng;

pub mod rms_norm;
// group A: elementwise, norms, RoPE, quantisation round trips
pub mod act_quant;
pub mod embedding;
pub mod fp4_round_trip;
pub mod hadamard;
pub mod head_rms_norm;
pub mod rope;
pub mod swiglu;
// group B: GEMMs
// group C: mHC, routers, MoE join
// group D: compressor, indexer, attention

pub use faults::Faults;
