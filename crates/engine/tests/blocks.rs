//! The block pool under the engine: a prefix hit shares blocks, eviction under pressure equals a cold cache, a cancel frees its blocks, nothing leaks.

mod common;

use common::{Done, drain, engine, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{EngineConfig, FinishReason, GenerateParams};

fn params(seed: u64, max_tokens: usize) -> GenerateParams {
    GenerateParams {
        sampling: SamplingParams {
            temperature: 1.0,
            top_p: 0.9,
            ..Default::default()
        },
        seed: Some(seed),
        max_tokens,
        ..Default::default()
    }
}

fn cold(p: &[u32], gp: &GenerateParams) -> Done {
    let mut e = engine(
        EngineConfig {
            prefix_cache: false,
            ..Default::default()
        },
        1,
    );
    let d = submit(&mut e, p.to_vec(), gp.clone());
    drain(&mut e);
    d.lock().unwrap().clone()
}

#[test]
fn a_prefix_hit_shares_blocks_instead_of_copying_them() {
    let p = prompt(300, 21);
    let gp = params(5, 4);
    let mut e = engine(EngineConfig::default(), 1);
    let first = submit(&mut e, p.clone(), gp.clone());
    drain(&mut e);
    let s = e.stats();
    assert_eq!(
        (s.blocks_used, s.blocks_cached),
        (0, 2),
        "two whole prompt blocks kept: {s:?}"
    );
    let (a, b) = (
        submit(&mut e, p.clone(), gp.clone()),
        submit(&mut e, p.clone(), params(6, 4)),
    );
    e.step();
    let s = e.stats();
    // Both hold the two shared blocks and one of their own: four blocks in use, not six (beside those held out for their state).
    let state = s.blocks_state;
    assert_eq!(
        (s.blocks_used, s.blocks_cached, s.blocks_reserved),
        (4, 0, 6 + state),
        "{s:?}"
    );
    drain(&mut e);
    let want = cold(&p, &gp);
    assert_eq!(first.lock().unwrap().sha, want.sha);
    let a = a.lock().unwrap();
    assert_eq!(
        (a.usage.cached_tokens, &a.sha),
        (256, &want.sha),
        "resumed differs from fresh"
    );
    assert_eq!(b.lock().unwrap().sha, cold(&p, &params(6, 4)).sha);
    let s = e.stats();
    assert_eq!((s.blocks_used, s.blocks_reserved, s.blocks_cached), (0, 0, 2), "{s:?}");
}

#[test]
fn eviction_under_pressure_equals_a_cold_cache() {
    let (p, q) = (prompt(300, 22), prompt(300, 23));
    let gp = params(7, 3);
    // A 300-token prompt plus 3 tokens holds three blocks, and the state it keeps outside them the rest.
    let pool_blocks = 3 + common::state_blocks();
    let mut e = engine(
        EngineConfig {
            pool_blocks,
            ..Default::default()
        },
        1,
    );
    let mut runs = Vec::new();
    for prompt in [&p, &p, &q, &p, &q] {
        let d = submit(&mut e, prompt.clone(), gp.clone());
        drain(&mut e);
        runs.push(d.lock().unwrap().clone());
    }
    let cached: Vec<usize> = runs.iter().map(|d| d.usage.cached_tokens).collect();
    assert_eq!(cached, [0, 256, 0, 0, 0], "each new prompt evicted the other's blocks");
    assert_eq!(e.stats().evictions, 6);
    let (want_p, want_q) = (cold(&p, &gp), cold(&q, &gp));
    for (d, want) in runs.iter().zip([&want_p, &want_p, &want_q, &want_p, &want_q]) {
        assert_eq!(d.sha, want.sha);
        assert_eq!(d.reason, Some(FinishReason::Length));
    }
    assert_eq!(e.stats().blocks_used, 0);
}

#[test]
fn a_cancel_frees_the_request_blocks_before_the_next_round() {
    let state = common::state_blocks();
    let mut e = engine(
        EngineConfig {
            token_budget: 64,
            pool_blocks: 4 + state,
            ..Default::default()
        },
        1,
    );
    let (long, long_sink) = common::recorder();
    let id = e.submit(prompt(400, 24), params(8, 100), long_sink).unwrap();
    let short = submit(&mut e, prompt(30, 25), params(9, 2));
    assert!(e.step());
    assert_eq!(e.stats().blocks_reserved, 4 + state, "{:?}", e.stats());
    let waiting = e.stats().waiting;
    assert_eq!(waiting, 1, "the short request waits for a block");
    for _ in 0..4 {
        e.step();
    }
    assert!(e.stats().blocks_used >= 2, "{:?}", e.stats());
    e.abort(id);
    let s = e.stats();
    assert_eq!((s.blocks_used, s.blocks_reserved), (0, 0), "{s:?}");
    assert_eq!(long.lock().unwrap().reason, Some(FinishReason::Abort));
    drain(&mut e);
    assert_eq!(short.lock().unwrap().sha, cold(&prompt(30, 25), &params(9, 2)).sha);
    assert_eq!(e.stats().blocks_used, 0);
}
