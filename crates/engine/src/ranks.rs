//! `--tp N`: a runner whose passes are shared by N ranks (attention heads and routed experts split, outputs gathered).

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::forward::device::{Device, DeviceSpec};
use tensorfold_model::dsv4::forward::parallel::{RankGroup, check_ranks};
use tensorfold_model::dsv4::semantics::Semantics;

use crate::launch;
use crate::runner::{Dsv4Runner, LoadedRunner, load_runner};

/// How ranks 1..N run beside rank 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// Threads on the CPU, NCCL on GPUs.
    #[default]
    Auto,
    /// Threads of this process (CPU only).
    Threads,
    /// One process per rank, exchanging over Unix-domain sockets (CPU or GPUs).
    Processes,
    /// One process per GPU, exchanging over NCCL.
    Nccl,
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Transport, String> {
        match s.trim() {
            "auto" => Ok(Transport::Auto),
            "threads" => Ok(Transport::Threads),
            "processes" => Ok(Transport::Processes),
            "nccl" => Ok(Transport::Nccl),
            other => Err(format!(
                "unknown ranks transport `{other}`: use auto, threads, processes or nccl"
            )),
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Transport::Auto => "auto",
            Transport::Threads => "threads",
            Transport::Processes => "processes",
            Transport::Nccl => "nccl",
        };
        f.write_str(s)
    }
}

/// How many ranks share the model, how they talk, and where each runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankOptions {
    pub tp: usize,
    pub transport: Transport,
    /// Each rank's GPU (`--rank-devices`); empty: rank r on `--device`'s GPU plus r.
    pub devices: Vec<usize>,
}

impl Default for RankOptions {
    fn default() -> RankOptions {
        RankOptions::tp(1)
    }
}

impl RankOptions {
    /// `tp` ranks with the default transport and placement.
    pub fn tp(tp: usize) -> RankOptions {
        RankOptions {
            tp,
            transport: Transport::Auto,
            devices: Vec::new(),
        }
    }

    /// The transport `Auto` stands for on `spec`.
    pub fn transport_on(&self, spec: DeviceSpec) -> Transport {
        match (self.transport, spec) {
            (Transport::Auto, DeviceSpec::Cpu) => Transport::Threads,
            (Transport::Auto, DeviceSpec::Cuda(_)) => Transport::Nccl,
            (t, _) => t,
        }
    }

    /// Where rank `rank` runs when rank 0 runs on `spec`.
    pub fn device_of(&self, spec: DeviceSpec, rank: usize) -> Result<DeviceSpec, String> {
        match spec {
            DeviceSpec::Cpu => Ok(DeviceSpec::Cpu),
            DeviceSpec::Cuda(first) if self.devices.is_empty() => Ok(DeviceSpec::Cuda(first + rank)),
            DeviceSpec::Cuda(_) => self.devices.get(rank).map(|&o| DeviceSpec::Cuda(o)).ok_or_else(|| {
                format!(
                    "--rank-devices names {} GPUs for --tp {}; name one per rank",
                    self.devices.len(),
                    self.tp
                )
            }),
        }
    }
}

/// A runner for `model` on `spec` shared by `tp` thread-ranks; the CPU gives each rank `threads / tp` threads (at least one).
pub fn runner(mut model: Dsv4Model, spec: DeviceSpec, threads: usize, tp: usize) -> Result<Dsv4Runner, String> {
    check_ranks(&model, tp)?;
    if tp == 1 {
        return Ok(Dsv4Runner::new(model, spec.open(threads)?));
    }
    if let DeviceSpec::Cuda(_) = spec {
        return Err(format!(
            "--tp {tp} with --device {spec}: thread-ranks share one process, which drives one GPU; use --ranks-transport nccl or processes (one process per GPU), or run --tp {tp} with --device cpu"
        ));
    }
    let per_rank = (threads / tp).max(1);
    let device = Device::Cpu(CpuLaunch::serving(per_rank));
    let ranks = RankGroup::threads(&model, tp, |_| Ok(Device::Cpu(CpuLaunch::serving(per_rank))))?;
    model.weights.keep_share(0, tp);
    Ok(Dsv4Runner {
        ranks: Some(ranks),
        ..Dsv4Runner::new(model, device)
    })
}

/// The ranks of `runner`, for reports: 1 when it runs alone.
pub fn rank_count(runner: &Dsv4Runner) -> usize {
    runner.ranks.as_ref().map_or(1, |r| r.ranks())
}

/// Loads the checkpoint in `dir` on `spec` shared by the ranks `opts` asks for (one rank loads any family the engine runs; one rank with a process transport named still passes through it).
pub fn load(
    dir: &std::path::Path,
    spec: DeviceSpec,
    threads: usize,
    opts: &RankOptions,
) -> Result<LoadedRunner, String> {
    use tensorfold_model::config::{dsv4, model_type};
    let tp = opts.tp;
    if tp == 1 && matches!(opts.transport, Transport::Auto | Transport::Threads) {
        return load_runner(dir, spec.open(threads)?);
    }
    let kind = model_type(dir).map_err(|e| e.to_string())?;
    if kind != dsv4::MODEL_TYPE {
        return Err(format!(
            "--tp {tp} runs `{}` checkpoints only; this one is `{kind}`; use --tp 1",
            dsv4::MODEL_TYPE
        ));
    }
    let model = tensorfold_model::dsv4::load_model(dir, Semantics::official()).map_err(|e| e.to_string())?;
    let (bos_token_id, eos_token_id) = (model.config.bos_token_id, model.config.eos_token_id);
    let max_context = model.config.max_position_embeddings;
    let runner = match opts.transport_on(spec) {
        Transport::Threads | Transport::Auto => runner(model, spec, threads, tp)?,
        t => launch::leader(dir, model, spec, threads, opts, t)?,
    };
    Ok(LoadedRunner {
        runner: Box::new(runner),
        bos_token_id,
        eos_token_id,
        max_context,
    })
}
