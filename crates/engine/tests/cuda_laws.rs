//! The exactness laws with the model on the GPU: concurrent equals solo, drafted equals serial, resumed equals fresh (each skips, saying why, without CUDA).

mod common;

use common::{Done, cuda, drain, engine_on, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{DraftConfig, EngineConfig, FinishReason, GenerateParams};

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

/// Runs `jobs` on a fresh CUDA engine, `together` at once or one by one.
fn run(test: &str, cfg: EngineConfig, jobs: &[(Vec<u32>, GenerateParams)], together: bool) -> Option<Vec<Done>> {
    let mut out = Vec::new();
    let mut e = engine_on(cfg, cuda(test)?);
    if together {
        let hs: Vec<_> = jobs
            .iter()
            .map(|(p, gp)| submit(&mut e, p.clone(), gp.clone()))
            .collect();
        drain(&mut e);
        out.extend(hs.iter().map(|h| h.lock().unwrap().clone()));
    } else {
        for (p, gp) in jobs {
            let h = submit(&mut e, p.clone(), gp.clone());
            drain(&mut e);
            out.push(h.lock().unwrap().clone());
        }
    }
    for d in &out {
        assert!(d.errors.is_empty(), "{test}: {:?}", d.errors);
        assert_eq!(d.reason, Some(FinishReason::Length), "{test}");
    }
    Some(out)
}

fn jobs(draft: bool) -> Vec<(Vec<u32>, GenerateParams)> {
    vec![
        (prompt(5, 1), params(0.0, 3, 6, draft)),
        (prompt(40, 2), params(0.7, 11, 6, draft)),
        (prompt(9, 3), params(1.0, 12, 6, draft)),
        (prompt(150, 4), params(1.0, 13, 5, draft)),
    ]
}

#[test]
fn concurrent_equals_solo_on_cuda() {
    let cfg = EngineConfig {
        token_budget: 48,
        drafts: DraftConfig::off(),
        ..Default::default()
    };
    let test = "concurrent_equals_solo_on_cuda";
    let Some(alone) = run(test, cfg, &jobs(false), false) else {
        return;
    };
    let together = run(test, cfg, &jobs(false), true).expect("CUDA opened once");
    for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(
            t.sha, a.sha,
            "request {i}: concurrent {:?} vs alone {:?}",
            t.tokens, a.tokens
        );
    }
    let distinct: std::collections::BTreeSet<_> = alone.iter().map(|d| d.sha.clone()).collect();
    assert_eq!(distinct.len(), alone.len(), "different requests gave the same tokens");
    eprintln!("{test}: {} requests, concurrent = solo", alone.len());
}

#[test]
fn drafted_equals_serial_on_cuda() {
    let cfg = EngineConfig {
        token_budget: 96,
        drafts: DraftConfig {
            mtp_drafts: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let test = "drafted_equals_serial_on_cuda";
    let Some(serial) = run(test, cfg, &jobs(false), true) else {
        return;
    };
    let drafted = run(test, cfg, &jobs(true), true).expect("CUDA opened once");
    let drafts: u64 = drafted.iter().map(|d| d.usage.drafted as u64).sum();
    let accepted: u64 = drafted.iter().map(|d| d.usage.accepted as u64).sum();
    for (i, (s, d)) in serial.iter().zip(&drafted).enumerate() {
        assert_eq!(
            d.sha, s.sha,
            "request {i}: drafted {:?} vs serial {:?}",
            d.tokens, s.tokens
        );
    }
    assert!(drafts > 0, "{test}: no drafts were proposed, so nothing was checked");
    eprintln!(
        "{test}: {} requests, {drafts} drafted, {accepted} accepted, drafted = serial",
        serial.len()
    );
}

#[test]
fn resumed_equals_fresh_on_cuda() {
    let test = "resumed_equals_fresh_on_cuda";
    let p = prompt(300, 8);
    let gp = params(1.0, 9, 5, false);
    let fresh_cfg = EngineConfig {
        prefix_cache: false,
        ..Default::default()
    };
    let Some(fresh) = run(test, fresh_cfg, &[(p.clone(), gp.clone())], false) else {
        return;
    };
    let twice = run(
        test,
        EngineConfig::default(),
        &[(p.clone(), gp.clone()), (p, gp)],
        false,
    )
    .expect("CUDA opened once");
    assert_eq!(twice[0].sha, fresh[0].sha, "first run differs from fresh");
    assert_eq!(twice[1].usage.cached_tokens, 256, "two 128-token blocks resumed");
    assert_eq!(twice[1].sha, fresh[0].sha, "resumed differs from fresh");
    eprintln!("{test}: 256 tokens resumed, resumed = fresh");
}
