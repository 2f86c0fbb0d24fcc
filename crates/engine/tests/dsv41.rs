//! The exactness laws for DeepSeek V4.1 (tiny synth): concurrent equals solo, chunked equals whole, drafted equals `"draft": false`, resumed equals fresh.

mod common;

use std::path::Path;

use common::{Done, drain, prompt, recorder, submit};
use tensorfold_engine::draft::context::{DraftRequest, Proposer};
use tensorfold_engine::runner::load_runner;
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{Engine, EngineConfig, FinishReason, GenerateParams};
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::checkpoint::Checkpoint;
use tensorfold_model::synth::{self, Dsv41Preset, SynthOptions};

/// A tiny V4.1 synth (seed 5) in a fresh temp dir.
fn synth_tiny() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Dsv41Preset::Tiny,
        seed: 5,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template: true,
        force: false,
    };
    synth::write_dsv41(&opts).unwrap();
    dir
}

fn dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(synth_tiny).path()
}

/// The tiny synth with every block's output and the Markov head scaled by 2^-12 and the last stage's norm set to the main one, so a DSpark block's first draft nearly repeats the target (a stand-in for a trained drafter).
fn quiet_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = synth_tiny();
        quiet(dir.path());
        dir
    })
    .path()
}

/// Patches the checkpoint in `dir` in place (see `quiet_dir`).
fn quiet(dir: &Path) {
    let ckpt = Checkpoint::open(dir).unwrap();
    let t = ckpt.tensors();
    let last = format!("mtp.{}", 2);
    let mut patches: Vec<(std::path::PathBuf, std::ops::Range<usize>, Vec<u8>)> = Vec::new();
    for (name, e) in t {
        let bytes = ckpt.get(name).unwrap().bytes.to_vec();
        let output = ["wo_b.scale", "w2.scale", "engram.wkv.scale"]
            .iter()
            .any(|s| name.ends_with(s));
        let new = if output {
            // e8m0 scales: 2^-12 times the weight.
            bytes.iter().map(|&b| b.saturating_sub(12)).collect()
        } else if name == &format!("{last}.markov_head.head.weight") {
            let words = bytes.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]]));
            let scaled = words.map(|w| {
                if (w >> 7) & 0xff > 12 {
                    w - (12 << 7)
                } else {
                    w & 0x8000
                }
            });
            scaled.flat_map(u16::to_le_bytes).collect()
        } else if name == &format!("{last}.norm.weight") {
            ckpt.get("norm.weight").unwrap().bytes.to_vec()
        } else {
            continue;
        };
        patches.push((ckpt.file_of(e).to_path_buf(), e.file_bytes(), new));
    }
    drop(ckpt);
    for (path, range, new) in patches {
        let mut file = std::fs::read(&path).unwrap();
        file[range].copy_from_slice(&new);
        std::fs::write(&path, file).unwrap();
    }
}

fn engine(cfg: EngineConfig, threads: usize) -> Engine {
    engine_in(dir(), cfg, threads)
}

fn engine_in(dir: &Path, cfg: EngineConfig, threads: usize) -> Engine {
    let launch = CpuLaunch {
        threads,
        ..CpuLaunch::serial()
    };
    Engine::new(load_runner(dir, launch.into()).unwrap().runner, cfg)
}

fn params(temperature: f32, seed: u64, max_tokens: usize, draft: bool) -> GenerateParams {
    GenerateParams {
        sampling: SamplingParams {
            temperature,
            top_p: 0.95,
            ..Default::default()
        },
        seed: Some(seed),
        max_tokens,
        ignore_eos: true,
        draft,
        ..Default::default()
    }
}

fn solo(cfg: EngineConfig, p: &[u32], gp: &GenerateParams) -> Done {
    solo_in(dir(), cfg, p, gp)
}

fn solo_in(dir: &Path, cfg: EngineConfig, p: &[u32], gp: &GenerateParams) -> Done {
    let mut e = engine_in(dir, cfg, 1);
    let d = submit(&mut e, p.to_vec(), gp.clone());
    drain(&mut e);
    let d = d.lock().unwrap().clone();
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    d
}

#[test]
fn concurrent_and_chunked_equal_solo() {
    let cfg = EngineConfig {
        token_budget: 40,
        drafts: tensorfold_engine::DraftConfig::off(),
        ..Default::default()
    };
    let jobs = [
        (prompt(5, 1), params(0.0, 1, 5, false)),
        (prompt(37, 2), params(0.7, 2, 5, false)),
        (prompt(70, 3), params(1.0, 3, 4, false)),
    ];
    let alone: Vec<Done> = jobs.iter().map(|(p, gp)| solo(cfg, p, gp)).collect();
    let mut e = engine(cfg, 2);
    let handles: Vec<_> = jobs
        .iter()
        .map(|(p, gp)| submit(&mut e, p.clone(), gp.clone()))
        .collect();
    drain(&mut e);
    for (i, (h, a)) in handles.iter().zip(&alone).enumerate() {
        let c = h.lock().unwrap();
        assert_eq!(
            c.sha, a.sha,
            "request {i}: concurrent {:?} vs alone {:?}",
            c.tokens, a.tokens
        );
        assert_eq!(c.reason, Some(FinishReason::Length));
    }
    let distinct: std::collections::BTreeSet<_> = alone.iter().map(|d| d.sha.clone()).collect();
    assert_eq!(distinct.len(), alone.len(), "different requests give different tokens");
    for budget in [1, 7] {
        let chunked = EngineConfig {
            token_budget: budget,
            ..cfg
        };
        let (p, gp) = &jobs[2];
        assert_eq!(solo(chunked, p, gp).sha, alone[2].sha, "budget {budget}");
    }
}

/// Proposes the recorded serial output with every other proposal's second token wrong, so drafts are accepted and rejected.
struct Replay {
    out: Vec<Vec<u32>>,
    prompts: Vec<Vec<u32>>,
    calls: usize,
}

impl Proposer for Replay {
    fn propose(&mut self, req: &DraftRequest<'_>, max: usize) -> Vec<u32> {
        let Some(i) = self.prompts.iter().position(|p| p[..] == req.tokens[..req.prompt_len]) else {
            return Vec::new();
        };
        let done = req.tokens.len() - req.prompt_len;
        let mut d: Vec<u32> = self.out[i][done.min(self.out[i].len())..]
            .iter()
            .take(max)
            .copied()
            .collect();
        self.calls += 1;
        if self.calls.is_multiple_of(2) && d.len() > 1 {
            d[1] = (d[1] + 1) % 1000;
        }
        d
    }
}

#[test]
fn drafted_equals_draft_false() {
    let cfg = EngineConfig {
        token_budget: 64,
        ..Default::default()
    };
    let prompts: Vec<Vec<u32>> = (0..4).map(|i| prompt(4 + 9 * i, 30 + i as u32)).collect();
    let temps = [0.0, 0.7, 1.0, 0.0];
    let serial: Vec<Done> = prompts
        .iter()
        .zip(temps)
        .enumerate()
        .map(|(i, (p, t))| solo(cfg, p, &params(t, i as u64, 8, false)))
        .collect();
    assert!(
        serial.iter().all(|d| d.usage.drafted == 0),
        "`draft: false` runs no drafts"
    );
    let mut e = engine(cfg, 1);
    e.add_proposer(Box::new(Replay {
        out: serial.iter().map(|d| d.tokens.clone()).collect(),
        prompts: prompts.clone(),
        calls: 0,
    }));
    let handles: Vec<_> = prompts
        .iter()
        .zip(temps)
        .enumerate()
        .map(|(i, (p, t))| submit(&mut e, p.clone(), params(t, i as u64, 8, true)))
        .collect();
    drain(&mut e);
    let (mut drafted, mut accepted) = (0, 0);
    for (i, (h, s)) in handles.iter().zip(&serial).enumerate() {
        let d = h.lock().unwrap();
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        assert_eq!(
            d.sha, s.sha,
            "request {i}: drafted {:?} vs serial {:?}",
            d.tokens, s.tokens
        );
        drafted += d.usage.drafted;
        accepted += d.usage.accepted;
    }
    eprintln!("dsv41: {drafted} drafts, {accepted} accepted");
    assert!(
        accepted > 0 && accepted < drafted,
        "drafts accepted and rejected: {accepted} of {drafted}"
    );
}

#[test]
fn resumed_prefix_equals_fresh() {
    let p = prompt(300, 8);
    let gp = params(1.0, 9, 5, true);
    let fresh_cfg = EngineConfig {
        prefix_cache: false,
        ..Default::default()
    };
    let fresh = solo(fresh_cfg, &p, &gp);
    let mut e = engine(EngineConfig::default(), 1);
    let first = submit(&mut e, p.clone(), gp.clone());
    drain(&mut e);
    let (second, sink) = recorder();
    e.submit(p.clone(), gp.clone(), sink).unwrap();
    let mut longer = p.clone();
    longer.extend(prompt(21, 9));
    let third = submit(&mut e, longer.clone(), gp.clone());
    drain(&mut e);
    assert_eq!(first.lock().unwrap().sha, fresh.sha);
    let second = second.lock().unwrap();
    assert_eq!(second.usage.cached_tokens, 256, "two 128-token blocks resumed");
    assert_eq!(second.sha, fresh.sha, "resumed differs from fresh");
    let third = third.lock().unwrap();
    assert_eq!(third.usage.cached_tokens, 256);
    assert_eq!(
        third.sha,
        solo(fresh_cfg, &longer, &gp).sha,
        "resumed longer prompt differs from fresh"
    );
}

/// DSpark blocks as the only drafts: up to 5 a round, no context copies.
fn dspark_cfg(token_budget: usize) -> EngineConfig {
    EngineConfig {
        token_budget,
        drafts: tensorfold_engine::DraftConfig {
            mtp_drafts: 5,
            context_drafts: 0,
        },
        ..Default::default()
    }
}

#[test]
fn dspark_drafted_concurrent_equals_draft_false_solo() {
    let prompts: Vec<Vec<u32>> = (0..4).map(|i| prompt(3 + 11 * i, 50 + i as u32)).collect();
    let temps = [0.0, 0.7, 1.0, 0.0];
    let serial: Vec<Done> = prompts
        .iter()
        .zip(temps)
        .enumerate()
        .map(|(i, (p, t))| solo_in(quiet_dir(), dspark_cfg(64), p, &params(t, i as u64, 14, false)))
        .collect();
    let mut e = engine_in(quiet_dir(), dspark_cfg(64), 2);
    let handles: Vec<_> = prompts
        .iter()
        .zip(temps)
        .enumerate()
        .map(|(i, (p, t))| submit(&mut e, p.clone(), params(t, i as u64, 14, true)))
        .collect();
    drain(&mut e);
    let (mut drafted, mut accepted) = ([0; 2], [0; 2]);
    for (i, (h, s)) in handles.iter().zip(&serial).enumerate() {
        let d = h.lock().unwrap();
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        assert_eq!(
            d.sha, s.sha,
            "request {i}: DSpark-drafted {:?} vs serial {:?}",
            d.tokens, s.tokens
        );
        let sampled = (temps[i] != 0.0) as usize;
        drafted[sampled] += d.usage.drafted;
        accepted[sampled] += d.usage.accepted;
    }
    eprintln!(
        "dsv41 DSpark: greedy {} of {} drafts accepted, sampled {} of {}",
        accepted[0], drafted[0], accepted[1], drafted[1]
    );
    assert!(drafted.iter().all(|&n| n > 0), "DSpark drafts proposed: {drafted:?}");
    assert!(
        accepted.iter().all(|&n| n > 0),
        "DSpark drafts accepted, greedy and sampled: {accepted:?} of {drafted:?}"
    );
    assert!(
        accepted[0] < drafted[0] || accepted[1] < drafted[1],
        "some drafts rejected"
    );
}

#[test]
fn dspark_drafted_resumed_prefix_equals_fresh() {
    let p = prompt(300, 18);
    let serial = solo_in(quiet_dir(), dspark_cfg(512), &p, &params(0.0, 4, 9, false));
    let gp = params(0.0, 4, 9, true);
    let fresh = solo_in(
        quiet_dir(),
        EngineConfig {
            prefix_cache: false,
            ..dspark_cfg(512)
        },
        &p,
        &gp,
    );
    assert_eq!(fresh.sha, serial.sha, "fresh drafted differs from `draft: false`");
    assert!(fresh.usage.drafted > 0, "DSpark drafts proposed");
    eprintln!(
        "dsv41 DSpark fresh: {} of {} drafts accepted",
        fresh.usage.accepted, fresh.usage.drafted
    );
    let mut e = engine_in(quiet_dir(), dspark_cfg(512), 1);
    let first = submit(&mut e, p.clone(), gp.clone());
    drain(&mut e);
    let second = submit(&mut e, p.clone(), gp.clone());
    drain(&mut e);
    assert_eq!(first.lock().unwrap().sha, fresh.sha);
    let second = second.lock().unwrap();
    assert_eq!(second.usage.cached_tokens, 256, "two 128-token blocks resumed");
    assert_eq!(second.sha, fresh.sha, "resumed drafted differs from fresh");
    assert_eq!(
        (second.usage.drafted, second.usage.accepted),
        (fresh.usage.drafted, fresh.usage.accepted),
        "the resumed request drafts as the fresh one"
    );
}
