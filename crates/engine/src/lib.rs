//! TensorFold's engine: requests, lane rounds, the cache and keyed sampling; pure logic, tested without a model.

pub mod philox;
pub mod sampler;
