//! Exact drafting (law 3): drafted output equals `"draft": false` output, with drafts proposed, accepted and rejected.

mod common;

use std::collections::HashMap;

use common::{Done, Rec, drain, engine, prompt, submit};
use tensorfold_engine::draft::context::{DraftRequest, Proposer};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{DraftConfig, Engine, EngineConfig, GenerateParams, Priority};

/// Context copies and one MTP draft per round (MTP drafts are off by default).
fn with_mtp() -> DraftConfig {
    DraftConfig {
        mtp_drafts: 1,
        ..Default::default()
    }
}

const MAX_TOKENS: usize = 6;

/// Identifies a run: prompt, seed and temperature bits.
type RunKey = (Vec<u32>, Option<u64>, u32);

fn params(temperature: f32, seed: u64, draft: bool) -> GenerateParams {
    GenerateParams {
        sampling: SamplingParams {
            temperature,
            top_p: 0.95,
            ..Default::default()
        },
        seed: Some(seed),
        max_tokens: MAX_TOKENS,
        ignore_eos: true,
        draft,
        ..Default::default()
    }
}

fn run_key(prompt: &[u32], p: &GenerateParams) -> RunKey {
    (prompt.to_vec(), p.seed, p.sampling.temperature.to_bits())
}

/// Proposes the recorded serial output, every third proposal with its second token wrong (so some drafts are rejected).
struct Replay {
    runs: HashMap<RunKey, Vec<u32>>,
    calls: usize,
}

impl Proposer for Replay {
    fn propose(&mut self, req: &DraftRequest<'_>, max: usize) -> Vec<u32> {
        let key = run_key(&req.tokens[..req.prompt_len], req.params);
        let Some(out) = self.runs.get(&key) else {
            return Vec::new();
        };
        let done = req.tokens.len() - req.prompt_len;
        let mut d: Vec<u32> = out[done.min(out.len())..].iter().take(max).copied().collect();
        self.calls += 1;
        if self.calls.is_multiple_of(3) && d.len() > 1 {
            d[1] = (d[1] + 1) % 1000;
        }
        d
    }
}

/// 54 prompts of mixed lengths, some repeating a short pattern so context copies match.
fn prompts() -> Vec<Vec<u32>> {
    (0..54u32)
        .map(|i| {
            let mut p = prompt(3 + (i as usize * 7) % 50, i);
            if i % 6 == 0 {
                let pattern = p[..3].to_vec();
                p.extend(pattern.iter().cycle().take(9));
            }
            p
        })
        .collect()
}

fn jobs(draft: bool) -> Vec<(Vec<u32>, GenerateParams)> {
    let mut out = Vec::new();
    for p in prompts() {
        for temperature in [0.0, 0.7, 1.0] {
            for seed in [1, 2] {
                out.push((p.clone(), params(temperature, seed, draft)));
            }
        }
    }
    out
}

/// Runs `jobs` keeping `concurrency` in flight, submitting the next as one finishes.
fn run(e: &mut Engine, jobs: &[(Vec<u32>, GenerateParams)], concurrency: usize) -> Vec<Done> {
    let mut recs: Vec<Rec> = Vec::new();
    while recs.len() < jobs.len() || e.has_work() {
        let in_flight = recs.iter().filter(|r| r.lock().unwrap().ends == 0).count();
        if in_flight < concurrency && recs.len() < jobs.len() {
            let (p, gp) = &jobs[recs.len()];
            recs.push(submit(e, p.clone(), gp.clone()));
            continue;
        }
        assert!(e.step(), "work left but nothing ran");
    }
    recs.iter().map(|r| r.lock().unwrap().clone()).collect()
}

fn assert_same(label: &str, serial: &[Done], drafted: &[Done], jobs: &[(Vec<u32>, GenerateParams)]) {
    for (i, (s, d)) in serial.iter().zip(drafted).enumerate() {
        assert!(d.errors.is_empty(), "{label} job {i}: {:?}", d.errors);
        assert_eq!(
            d.sha, s.sha,
            "{label} job {i} (temperature {}): drafted {:?} vs serial {:?}",
            jobs[i].1.sampling.temperature, d.tokens, s.tokens
        );
        assert_eq!((d.ends, d.late), (1, 0), "{label} job {i}");
    }
}

fn counts(done: &[Done]) -> (usize, usize) {
    done.iter()
        .fold((0, 0), |(d, a), x| (d + x.usage.drafted, a + x.usage.accepted))
}

#[test]
fn drafted_equals_serial_for_every_prompt_temperature_seed_and_concurrency() {
    let cfg = EngineConfig {
        token_budget: 96,
        drafts: with_mtp(),
        ..Default::default()
    };
    let serial_jobs = jobs(false);
    let serial = run(&mut engine(cfg, 1), &serial_jobs, 8);
    assert_eq!(counts(&serial), (0, 0), "`draft: false` runs no drafts");
    let runs: HashMap<RunKey, Vec<u32>> = serial_jobs
        .iter()
        .zip(&serial)
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, ((p, gp), d))| (run_key(p, gp), d.tokens.clone()))
        .collect();
    let drafted_jobs = jobs(true);
    for concurrency in [1, 8] {
        let mut e = engine(cfg, 1);
        e.add_proposer(Box::new(Replay {
            runs: runs.clone(),
            calls: 0,
        }));
        let drafted = run(&mut e, &drafted_jobs, concurrency);
        let label = format!("concurrency {concurrency}");
        assert_same(&label, &serial, &drafted, &drafted_jobs);
        let (replayed, others): (Vec<_>, Vec<_>) = drafted.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        let replayed: Vec<Done> = replayed.into_iter().map(|(_, d)| d.clone()).collect();
        let others: Vec<Done> = others.into_iter().map(|(_, d)| d.clone()).collect();
        let (rd, ra) = counts(&replayed);
        let (od, oa) = counts(&others);
        eprintln!(
            "{label}: {} requests; replayed drafts {rd} ({ra} accepted), context and MTP drafts {od} ({oa} accepted)",
            drafted.len()
        );
        assert!(
            ra > 0 && ra < rd,
            "{label}: replayed drafts must be accepted and rejected: {ra} of {rd}"
        );
        assert!(
            od > oa,
            "{label}: context and MTP drafts were proposed and some rejected: {oa} of {od}"
        );
        let stats = e.stats();
        assert_eq!(stats.drafted_tokens as usize, rd + od);
        assert_eq!(stats.accepted_tokens as usize, ra + oa);
    }
}

#[test]
fn chained_mtp_drafts_alone_equal_serial() {
    let cfg = EngineConfig {
        drafts: DraftConfig {
            mtp_drafts: 3,
            context_drafts: 0,
        },
        ..Default::default()
    };
    let all = jobs(true);
    let picked: Vec<_> = all.iter().step_by(9).cloned().collect();
    let serial_jobs: Vec<_> = picked
        .iter()
        .map(|(p, gp)| {
            (
                p.clone(),
                GenerateParams {
                    draft: false,
                    ..gp.clone()
                },
            )
        })
        .collect();
    let serial = run(&mut engine(cfg, 1), &serial_jobs, 8);
    let drafted = run(&mut engine(cfg, 2), &picked, 8);
    assert_same("MTP only", &serial, &drafted, &picked);
    let (d, a) = counts(&drafted);
    eprintln!("MTP only: {} requests, {d} drafts, {a} accepted", picked.len());
    assert!(d >= picked.len(), "every request drafted at least once: {d}");
}

#[test]
fn drafts_off_in_the_engine_config_run_none() {
    let cfg = EngineConfig {
        drafts: DraftConfig::off(),
        ..Default::default()
    };
    let mut e = engine(cfg, 1);
    let looping: Vec<u32> = [5u32, 6, 7].iter().cycle().take(30).copied().collect();
    let d = submit(&mut e, looping, params(0.0, 1, true));
    drain(&mut e);
    assert_eq!(counts(&[d.lock().unwrap().clone()]), (0, 0));
    assert_eq!(e.stats().drafted_tokens, 0);
}

#[test]
fn resumed_prefixes_and_preempted_replays_draft_exactly() {
    let cfg = EngineConfig {
        token_budget: 64,
        pool_blocks: common::pool(2),
        drafts: with_mtp(),
        ..Default::default()
    };
    let long = prompt(140, 40);
    let mut follow = long.clone();
    follow.extend(prompt(12, 41));
    let mut bg = params(1.0, 5, true);
    bg.priority = Priority::Background;
    bg.max_tokens = 16;
    let fg = params(0.7, 6, true);
    let serial = |p: &[u32], gp: &GenerateParams| {
        let mut e = engine(cfg, 1);
        let d = submit(
            &mut e,
            p.to_vec(),
            GenerateParams {
                draft: false,
                ..gp.clone()
            },
        );
        drain(&mut e);
        d.lock().map(|g| g.clone()).unwrap()
    };
    let mut e = engine(cfg, 1);
    let b = submit(&mut e, long.clone(), bg.clone());
    while b.lock().unwrap().tokens.len() < 4 {
        e.step();
    }
    let f = submit(&mut e, follow.clone(), fg.clone());
    drain(&mut e);
    let (b, f) = (b.lock().unwrap().clone(), f.lock().unwrap().clone());
    assert_eq!(
        b.usage.preemptions, 1,
        "the foreground request preempted the drafting one"
    );
    assert_eq!(
        f.usage.cached_tokens, 128,
        "the follow-up resumed the drafting request's prefix"
    );
    assert_eq!(b.sha, serial(&long, &bg).sha, "preempted and replayed with drafts");
    assert_eq!(b.tokens.len(), 16, "no token was sent twice");
    assert_eq!(f.sha, serial(&follow, &fg).sha, "resumed with drafts");
    assert!(
        b.usage.drafted > 0 && f.usage.drafted > 0,
        "both drafted: {:?} {:?}",
        b.usage,
        f.usage
    );
}
