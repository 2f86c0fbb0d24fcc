//! Concurrent equals solo at scale: 32 mixed requests under every lane limit, budget, arrival pattern, cache size and thread count give the tokens each gives alone on a cold engine.

mod common;

use std::sync::OnceLock;

use common::{Done, Rec, drain, engine, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{Engine, EngineConfig, EngineStats, FinishReason, GenerateParams, Priority};

/// 32 requests: three 3-turn chats sharing a system prompt (each turn extends the last), repeated prompts with different keys, and lone prompts from 1 to 200 tokens; every temperature, cut and key kind.
fn workload() -> Vec<(Vec<u32>, GenerateParams)> {
    let system = prompt(140, 100);
    let mut prompts = Vec::new();
    for conv in 0..3u32 {
        let mut turn = system.clone();
        turn.extend(prompt(20, 101 + conv));
        for t in 0..3u32 {
            prompts.push(turn.clone());
            turn.extend(prompt(90, 110 + conv * 10 + t));
        }
    }
    let shared = prompt(60, 120);
    prompts.extend([shared.clone(), shared.clone(), shared]);
    for (i, n) in [
        1usize, 2, 5, 9, 17, 30, 33, 47, 64, 77, 100, 127, 128, 129, 150, 170, 185, 200, 3, 12,
    ]
    .into_iter()
    .enumerate()
    {
        prompts.push(prompt(n, 130 + i as u32));
    }
    prompts
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let sampling = SamplingParams {
                temperature: [0.0, 0.7, 1.0][i % 3],
                top_k: [0, 5, 50][(i / 3) % 3],
                top_p: [1.0, 0.9, 0.5][(i / 2) % 3],
                min_p: [0.0, 0.05, 0.2][(i / 5) % 3],
            };
            let gp = GenerateParams {
                sampling,
                seed: (i % 2 == 0).then_some(1000 + i as u64),
                max_tokens: 2 + i % 4,
                priority: if i % 7 == 3 {
                    Priority::Background
                } else {
                    Priority::Foreground
                },
                ..Default::default()
            };
            (p, gp)
        })
        .collect()
}

/// Each request alone, one after another, prefix cache off: the reference.
fn reference() -> &'static [Done] {
    static REF: OnceLock<Vec<Done>> = OnceLock::new();
    REF.get_or_init(|| {
        let cfg = EngineConfig {
            token_budget: 2048,
            prefix_cache: false,
            ..Default::default()
        };
        let mut e = engine(cfg, 1);
        workload()
            .into_iter()
            .map(|(p, gp)| {
                let d = submit(&mut e, p, gp);
                drain(&mut e);
                d.lock().unwrap().clone()
            })
            .collect()
    })
}

/// How requests arrive.
#[derive(Clone, Copy, Debug)]
enum Arrival {
    Together,
    /// `size` at a time with `rounds` lane rounds between bursts.
    Bursts {
        size: usize,
        rounds: usize,
    },
    OneAtATime,
}

/// Runs the workload and checks every request against the reference; returns the cached tokens reported and stats.
fn check(cfg: EngineConfig, threads: usize, arrival: Arrival) -> (usize, EngineStats) {
    let want = reference();
    let work = workload();
    let mut e = engine(cfg, threads);
    let mut got: Vec<Rec> = Vec::new();
    for chunk in work.chunks(match arrival {
        Arrival::Together => work.len(),
        Arrival::Bursts { size, .. } => size,
        Arrival::OneAtATime => 1,
    }) {
        got.extend(chunk.iter().map(|(p, gp)| submit(&mut e, p.clone(), gp.clone())));
        match arrival {
            Arrival::Bursts { rounds, .. } => (0..rounds).for_each(|_| {
                e.step();
            }),
            Arrival::OneAtATime => drain(&mut e),
            Arrival::Together => {}
        }
    }
    drain(&mut e);
    assert_clean(&e);
    let stats = e.stats();
    let mut cached = 0;
    for (i, ((g, w), (p, gp))) in got.iter().zip(want).zip(&work).enumerate() {
        let g = g.lock().unwrap();
        let what = format!("request {i} ({cfg:?}, {threads} threads, {arrival:?})");
        assert!(g.errors.is_empty(), "{what}: {:?}", g.errors);
        assert_eq!(g.sha, w.sha, "{what}: {:?} vs alone {:?}", g.tokens, w.tokens);
        assert_eq!(g.tokens, w.tokens, "{what}");
        assert_eq!((g.ends, g.late), (1, 0), "{what}: one terminal event, nothing after it");
        assert_eq!(g.reason, Some(FinishReason::Length), "{what}");
        assert_eq!(g.tokens.len(), gp.max_tokens, "{what}");
        let from = p.len() as u32;
        assert_eq!(
            g.positions,
            (from..from + gp.max_tokens as u32).collect::<Vec<_>>(),
            "{what}"
        );
        cached += g.usage.cached_tokens;
    }
    // A replayed request reports its last admission's resumed tokens; the engine counts every resume.
    if stats.preemptions == 0 {
        assert_eq!(cached as u64, stats.cached_tokens);
    }
    assert!(cached as u64 <= stats.cached_tokens);
    (cached, stats)
}

fn assert_clean(e: &Engine) {
    let s = e.stats();
    assert_eq!(
        (s.running, s.waiting, s.blocks_reserved, s.blocks_used),
        (0, 0, 0, 0),
        "{s:?}"
    );
}

fn cfg(max_lanes: usize, token_budget: usize) -> EngineConfig {
    EngineConfig {
        max_lanes,
        token_budget,
        ..Default::default()
    }
}

#[test]
fn the_reference_is_varied() {
    let distinct: std::collections::BTreeSet<_> = reference().iter().map(|d| d.sha.clone()).collect();
    assert!(distinct.len() >= 28, "only {} distinct outputs", distinct.len());
}

#[test]
fn together_under_every_lane_limit_and_budget() {
    for (lanes, budget) in [(64, 256), (1, 16), (4, 2048), (32, 16), (32, 2048), (4, 100)] {
        check(cfg(lanes, budget), 1, Arrival::Together);
    }
}

#[test]
fn in_bursts_and_one_at_a_time() {
    check(cfg(4, 100), 1, Arrival::Bursts { size: 8, rounds: 3 });
    check(cfg(32, 64), 1, Arrival::Bursts { size: 5, rounds: 1 });
    let (cached, _) = check(cfg(64, 256), 1, Arrival::OneAtATime);
    // Every chat turn but the very first resumes the system prompt's first block; no turn reaches a second.
    assert_eq!(cached, 8 * 128, "the chats resumed their shared prefix");
}

#[test]
fn two_threads_equal_one() {
    check(cfg(32, 2048), 2, Arrival::Together);
    check(cfg(4, 64), 2, Arrival::Bursts { size: 8, rounds: 2 });
}

#[test]
fn eviction_and_memory_pressure_change_nothing_but_speed() {
    for pool_blocks in [common::pool(3), common::pool(5)] {
        let small = EngineConfig {
            pool_blocks,
            ..cfg(8, 128)
        };
        let (cached, stats) = check(small, 1, Arrival::OneAtATime);
        assert!(cached > 0, "some prefixes survived eviction ({pool_blocks} blocks)");
        assert!(stats.evictions > 0, "the pool ran short ({pool_blocks} blocks)");
    }
    let tight = EngineConfig {
        pool_blocks: common::pool(6),
        ..cfg(8, 96)
    };
    for arrival in [Arrival::Together, Arrival::Bursts { size: 6, rounds: 4 }] {
        let (_, stats) = check(tight, 1, arrival);
        assert!(
            stats.preemptions > 0,
            "foreground work preempted background work ({arrival:?})"
        );
    }
}
