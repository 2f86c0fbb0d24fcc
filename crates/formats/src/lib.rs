//! Number formats and packed layouts: bf16, FP8 e4m3fn, e8m0, FP4 e2m1, MXFP4, block-scaled FP8, INT4 packs.

pub mod bf16;
pub mod block_fp8;
pub mod e2m1;
pub mod e4m3;
pub mod e8m0;
mod error;
pub mod int4_pack;
pub mod mxfp4;

pub use error::FormatError;
