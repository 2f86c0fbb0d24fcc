//! TensorFold's engine: requests, lane rounds, the block pool and prefix cache, keyed sampling.

pub mod draft;
pub mod engine;
pub mod handle;
pub mod launch;
pub mod philox;
pub mod pool;
pub mod prefix;
pub mod ranks;
pub mod request;
pub mod reserve;
pub mod runner;
pub mod sampler;
pub mod scheduler;
pub mod tables;

pub use draft::DraftConfig;
pub use engine::{Engine, EngineConfig, EngineStats, token_sha};
pub use handle::EngineHandle;
pub use request::{Event, FinishReason, GenerateParams, Priority, RequestId, Usage};
