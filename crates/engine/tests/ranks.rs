//! `--tp N` on CPU thread-ranks: the tiny model served by 1, 2 and 4 ranks gives the same tokens, solo and concurrent.

mod common;

use common::{Done, drain, model, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{DraftConfig, Engine, EngineConfig, GenerateParams, ranks};
use tensorfold_model::dsv4::forward::device::DeviceSpec;

fn params(temperature: f32, seed: Option<u64>, max_tokens: usize) -> GenerateParams {
    GenerateParams {
        sampling: SamplingParams {
            temperature,
            top_p: 0.95,
            ..Default::default()
        },
        seed,
        max_tokens,
        ..Default::default()
    }
}

fn engine(cfg: EngineConfig, tp: usize) -> Engine {
    let runner = ranks::runner(model(), DeviceSpec::Cpu, tp, tp).unwrap();
    assert_eq!(ranks::rank_count(&runner), tp);
    Engine::new(Box::new(runner), cfg)
}

fn requests() -> Vec<(Vec<u32>, GenerateParams)> {
    vec![
        (prompt(5, 1), params(0.0, None, 6)),
        (prompt(40, 2), params(0.7, Some(11), 6)),
        (prompt(9, 3), params(1.0, Some(12), 5)),
        (prompt(140, 4), params(1.0, None, 4)),
    ]
}

/// Every request's record, run alone (`concurrent` false) or all at once.
fn serve(cfg: EngineConfig, tp: usize, concurrent: bool) -> Vec<Done> {
    let reqs = requests();
    if !concurrent {
        return reqs
            .iter()
            .map(|(p, gp)| {
                let mut e = engine(cfg, tp);
                let d = submit(&mut e, p.clone(), gp.clone());
                drain(&mut e);
                d.lock().unwrap().clone()
            })
            .collect();
    }
    let mut e = engine(cfg, tp);
    let handles: Vec<_> = reqs
        .iter()
        .map(|(p, gp)| submit(&mut e, p.clone(), gp.clone()))
        .collect();
    drain(&mut e);
    handles.iter().map(|h| h.lock().unwrap().clone()).collect()
}

fn assert_same(what: &str, got: &[Done], want: &[Done]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.errors.is_empty(), "{what}: request {i} failed: {:?}", g.errors);
        assert_eq!(g.sha, w.sha, "{what}: request {i}: {:?} vs {:?}", g.tokens, w.tokens);
        assert_eq!(
            g.tokens.len(),
            requests()[i].1.max_tokens,
            "{what}: request {i} stopped early"
        );
    }
}

#[test]
fn token_sha_is_the_same_on_1_2_and_4_ranks() {
    let cfg = EngineConfig {
        token_budget: 48,
        ..Default::default()
    };
    let reference = serve(cfg, 1, false);
    let distinct: std::collections::BTreeSet<_> = reference.iter().map(|d| d.sha.clone()).collect();
    assert_eq!(
        distinct.len(),
        reference.len(),
        "the requests must differ to test anything"
    );
    assert_same("1 rank, concurrent", &serve(cfg, 1, true), &reference);
    for tp in [2, 4] {
        assert_same(&format!("{tp} ranks, solo"), &serve(cfg, tp, false), &reference);
        assert_same(&format!("{tp} ranks, concurrent"), &serve(cfg, tp, true), &reference);
    }
}

#[test]
fn mtp_drafts_on_ranks_match_one_rank() {
    let cfg = EngineConfig {
        token_budget: 64,
        drafts: DraftConfig {
            mtp_drafts: 2,
            context_drafts: 4,
        },
        ..Default::default()
    };
    let reference = serve(cfg, 1, true);
    assert_same("2 ranks with MTP drafts", &serve(cfg, 2, true), &reference);
}

#[test]
fn a_rank_count_that_does_not_divide_the_model_is_refused_with_the_choices() {
    let err = ranks::runner(model(), DeviceSpec::Cpu, 1, 3)
        .err()
        .expect("3 ranks cannot split 4 heads");
    assert!(err.contains("--tp 3") && err.contains("use one of 1, 2, 4"), "{err}");
    let err = ranks::runner(model(), DeviceSpec::Cpu, 1, 0).err().expect("0 ranks");
    assert!(err.contains("at least 1"), "{err}");
}

#[test]
fn thread_ranks_on_a_gpu_are_refused_with_the_process_transports() {
    let why = ranks::runner(model(), DeviceSpec::Cuda(0), 1, 2)
        .err()
        .expect("thread-ranks share one process, which drives one GPU");
    assert!(
        why.contains("--tp 2 with --device cuda:0") && why.contains("--ranks-transport nccl or processes"),
        "{why}"
    );
}

#[test]
fn each_rank_keeps_only_its_share_of_the_weights() {
    let full = model().weights.held_bytes();
    let mut held = 0;
    let mut experts = Vec::new();
    for rank in 0..4 {
        let report = model().weights.keep_share(rank, 4);
        assert_eq!(report.total_bytes, full);
        assert!(report.held_bytes < full, "rank {rank} dropped nothing: {report}");
        held += report.held_bytes;
        experts.push(report.experts);
    }
    assert_eq!(
        experts,
        vec![0..2, 2..4, 4..6, 6..8],
        "the experts split as --tp splits them"
    );
    let sinks: u64 = model()
        .weights
        .layers
        .iter()
        .map(|b| b.attn.attn_sink.len() as u64 * 4)
        .sum::<u64>()
        + model()
            .weights
            .mtp
            .iter()
            .map(|m| m.block.attn.attn_sink.len() as u64 * 4)
            .sum::<u64>();
    assert_eq!(
        held,
        full + 3 * sinks,
        "together the ranks hold the model once, the small sinks on every rank"
    );
}
