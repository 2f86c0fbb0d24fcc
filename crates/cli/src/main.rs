//! `tensorfold`: the TensorFold command line.

mod bench;
mod contract;
mod default_model;
mod generate;
mod info;
mod info_v41;
mod ranks;
mod serve;
mod synth;

use clap::{Parser, Subcommand};

/// TensorFold: bit-exact inference for mixture-of-experts language models (DeepSeek V4 first).
#[derive(Parser)]
#[command(name = "tensorfold", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt, streaming it (the built-in demo model unless --model is given).
    Generate(generate::GenerateArgs),
    /// Serve the OpenAI-compatible HTTP API (chat, completions, streaming, keys, metrics).
    Serve(serve::ServeArgs),
    /// Write a random-weight checkpoint in the official DeepSeek V4 or V4.1 layout (for tests and benchmarks).
    Synth(synth::SynthArgs),
    /// Describe a checkpoint: family, layer plan, parameters, bytes by format, memory at a context length.
    Info(info::InfoArgs),
    /// Prove every registered kernel: written, accurate, invariant, repeatable, and every planted control caught.
    KernelContract(contract::ContractArgs),
    /// Benchmarks: kernel speed in-process; decode, prompt cache and concurrency against a running server over HTTP.
    Bench(bench::BenchArgs),
    /// One worker rank of `--tp N` over processes, started by rank 0.
    #[command(name = "rank-worker", hide = true)]
    RankWorker(ranks::WorkerCmd),
}

fn main() -> std::process::ExitCode {
    // SAFETY: no other thread runs yet. NVLink multicast stays off for NCCL here and in every rank this process starts.
    unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(args) => generate::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Synth(args) => synth::run(args),
        Command::Info(args) => info::run(args),
        Command::KernelContract(args) => contract::run(args),
        Command::Bench(args) => bench::run(args),
        Command::RankWorker(args) => ranks::run_worker(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
