//! `--tp`, `--ranks-transport` and `--rank-devices`, shared by generate and serve, and the hidden `rank-worker` subcommand that runs ranks 1..N.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use tensorfold_engine::launch::{WorkerArgs, worker};
use tensorfold_engine::ranks::{RankOptions, Transport};
use tensorfold_model::dsv4::forward::device::DeviceSpec;

#[derive(Args, Clone, Debug)]
pub struct RankArgs {
    /// Ranks sharing the model (attention heads and routed experts split; the tokens do not depend on it).
    #[arg(long, default_value_t = 1)]
    pub tp: usize,
    /// How ranks 1..N run: threads (CPU), processes (one per rank, over local sockets), nccl (one process per GPU); auto is threads on the CPU, nccl on CUDA.
    #[arg(long, default_value = "auto")]
    pub ranks_transport: Transport,
    /// Each rank's GPU, comma-separated (default: --device's GPU plus the rank).
    #[arg(long, value_delimiter = ',')]
    pub rank_devices: Vec<usize>,
}

impl RankArgs {
    pub fn options(&self) -> RankOptions {
        RankOptions {
            tp: self.tp,
            transport: self.ranks_transport,
            devices: self.rank_devices.clone(),
        }
    }
}

/// One worker rank, started by rank 0 (not for people to run).
#[derive(Args)]
pub struct WorkerCmd {
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    rank: usize,
    #[arg(long)]
    tp: usize,
    #[arg(long)]
    device: DeviceSpec,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long)]
    transport: Transport,
    #[arg(long)]
    connect: PathBuf,
}

pub fn run_worker(a: WorkerCmd) -> anyhow::Result<()> {
    let args = WorkerArgs {
        model: a.model,
        rank: a.rank,
        tp: a.tp,
        device: a.device,
        threads: a.threads,
        transport: a.transport,
        connect: a.connect,
    };
    worker(&args).map_err(|e| anyhow!("rank {} of {}: {e}", args.rank, args.tp))
}
