//! `tensorfold bench`: kernel speed in-process, and decode, prompt-cache and concurrency benchmarks over HTTP.

mod cache;
mod client;
mod concurrent;
mod decode;
mod exchange;
mod forward;
mod kernels;
mod prompts;
mod sse;
mod stats;

use clap::{Args, Subcommand};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand)]
enum BenchWhat {
    /// The GEMM kernels on V4-Flash shapes with 1 and 2 threads, against a plain 2-thread read of a large buffer.
    Kernels(kernels::KernelsArgs),
    /// The model in-process on --device: prompt speed, batch-1 decode per token and per layer against weight bytes and the device copy bandwidth.
    Forward(forward::ForwardArgs),
    /// What --tp ranks exchange per layer (gathers of whole heads and experts) against a plain all-reduce of the layer outputs, on thread-, process- or NCCL-ranks.
    Exchange(exchange::ExchangeArgs),
    /// Single-stream SSE decode speed and inter-token latency over the shipped prompts, against a running server.
    Decode(decode::DecodeArgs),
    /// Time to first token of a long prompt the server has never seen, then of the same prompt resumed.
    Cache(cache::CacheArgs),
    /// A set of requests alone and at several concurrencies: aggregate throughput, latency, and equal token_sha.
    Concurrent(concurrent::ConcurrentArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Kernels(a) => kernels::run(a),
        BenchWhat::Forward(a) => forward::run(a),
        BenchWhat::Exchange(a) => exchange::run(a),
        BenchWhat::Decode(a) => client::block_on(decode::run(a)),
        BenchWhat::Cache(a) => client::block_on(cache::run(a)),
        BenchWhat::Concurrent(a) => client::block_on(concurrent::run(a)),
    }
}
