//! Checkpoints and configs of TensorFold's model families, and the synthetic checkpoints the tests use.

pub mod checkpoint;
pub mod config;
pub mod dsv4;
pub mod dsv41;
pub mod dtype;
pub mod error;
mod header;
pub mod manifest;
pub mod progress;
pub mod synth;
pub mod tokenizer;

pub use checkpoint::{Checkpoint, TensorView};
pub use dtype::DType;
pub use error::CheckpointError;
pub use manifest::{Manifest, Problem, TensorSpec};
