//! `--tp N`: a runner whose passes are shared by N ranks (attention heads and routed experts split, outputs gathered).

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::forward::device::{Device, DeviceSpec};
use tensorfold_model::dsv4::forward::parallel::{RankGroup, check_ranks};

use tensorfold_model::dsv4::semantics::Semantics;

use crate::runner::{Dsv4Runner, LoadedRunner, load_runner};

/// A runner for `model` on `spec` shared by `tp` ranks; the CPU gives each rank `threads / tp` threads (at least one).
pub fn runner(model: Dsv4Model, spec: DeviceSpec, threads: usize, tp: usize) -> Result<Dsv4Runner, String> {
    check_ranks(&model, tp)?;
    if tp == 1 {
        return Ok(Dsv4Runner::new(model, spec.open(threads)?));
    }
    if let DeviceSpec::Cuda(_) = spec {
        let why = match tensorfold_kernels::cuda::multi_gpu(tp) {
            Err(why) => why,
            Ok(()) => {
                "ranks on several GPUs need one process per GPU joined over NCCL, which this build does not have yet"
                    .into()
            }
        };
        return Err(format!(
            "--tp {tp} with --device {spec}: {why}; run --tp {tp} with --device cpu, or --tp 1 on one GPU"
        ));
    }
    let per_rank = (threads / tp).max(1);
    let device = Device::Cpu(CpuLaunch::serving(per_rank));
    let ranks = RankGroup::threads(&model, tp, |_| Ok(Device::Cpu(CpuLaunch::serving(per_rank))))?;
    Ok(Dsv4Runner {
        ranks: Some(ranks),
        ..Dsv4Runner::new(model, device)
    })
}

/// The ranks of `runner`, for reports: 1 when it runs alone.
pub fn rank_count(runner: &Dsv4Runner) -> usize {
    runner.ranks.as_ref().map_or(1, |r| r.ranks())
}

/// Loads the checkpoint in `dir` on `spec` shared by `tp` ranks (`tp` 1 loads any family the engine runs).
pub fn load(dir: &std::path::Path, spec: DeviceSpec, threads: usize, tp: usize) -> Result<LoadedRunner, String> {
    use tensorfold_model::config::{dsv4, model_type};
    if tp == 1 {
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
    Ok(LoadedRunner {
        runner: Box::new(runner(model, spec, threads, tp)?),
        bos_token_id,
        eos_token_id,
        max_context,
    })
}
