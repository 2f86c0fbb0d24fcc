//! TensorFold's engine: requests, lane rounds, the prefix cache and keyed sampling.

pub mod draft;
pub mod engine;
pub mod handle;
pub mod philox;
pub mod prefix;
pub mod request;
pub mod runner;
pub mod sampler;
pub mod scheduler;

pub use draft::DraftConfig;
pub use engine::{Engine, EngineConfig, EngineStats, token_sha};
pub use handle::EngineHandle;
pub use request::{Event, FinishReason, GenerateParams, Priority, RequestId, Usage};
