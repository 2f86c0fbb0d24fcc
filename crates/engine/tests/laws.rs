//! The exactness laws through the engine: concurrent equals solo, chunked equals whole, resumed equals fresh, preempted-and-replayed equals uninterrupted.

mod common;

use common::{Done, drain, engine, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{EngineConfig, Event, FinishReason, GenerateParams, Priority};

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

fn solo(cfg: EngineConfig, p: &[u32], gp: &GenerateParams) -> Done {
    let mut e = engine(cfg, 1);
    let d = submit(&mut e, p.to_vec(), gp.clone());
    drain(&mut e);
    d.lock().unwrap().clone()
}

#[test]
fn concurrent_equals_solo_at_every_temperature() {
    let cfg = EngineConfig {
        token_budget: 48,
        ..Default::default()
    };
    let prompts: Vec<(Vec<u32>, GenerateParams)> = vec![
        (prompt(5, 1), params(0.0, None, 6)),
        (prompt(40, 2), params(0.7, Some(11), 6)),
        (prompt(9, 3), params(1.0, Some(12), 6)),
        (prompt(70, 4), params(1.0, None, 5)),
    ];
    let alone: Vec<Done> = prompts.iter().map(|(p, gp)| solo(cfg, p, gp)).collect();
    let mut e = engine(cfg, 2);
    let handles: Vec<_> = prompts
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
        assert_eq!(c.tokens.len(), prompts[i].1.max_tokens);
    }
    let distinct: std::collections::BTreeSet<_> = alone.iter().map(|d| d.sha.clone()).collect();
    assert_eq!(distinct.len(), alone.len());
}

#[test]
fn logprobs_are_the_same_bits_concurrent_or_solo() {
    let cfg = EngineConfig {
        token_budget: 32,
        ..Default::default()
    };
    let asks: Vec<(Vec<u32>, GenerateParams)> = [(6, 0.0, 0), (30, 0.9, 5), (11, 1.0, 20)]
        .iter()
        .enumerate()
        .map(|(i, &(n, t, top))| {
            let gp = GenerateParams {
                logprobs: Some(top),
                ..params(t, Some(i as u64), 5)
            };
            (prompt(n, 20 + i as u32), gp)
        })
        .collect();
    let alone: Vec<Done> = asks.iter().map(|(p, gp)| solo(cfg, p, gp)).collect();
    let mut e = engine(cfg, 2);
    let handles: Vec<_> = asks
        .iter()
        .map(|(p, gp)| submit(&mut e, p.clone(), gp.clone()))
        .collect();
    drain(&mut e);
    for (i, (h, a)) in handles.iter().zip(&alone).enumerate() {
        let c = h.lock().unwrap();
        let top = asks[i].1.logprobs.unwrap();
        assert_eq!(c.logprobs.len(), c.tokens.len(), "request {i}: one entry per token");
        assert!(
            c.logprobs
                .iter()
                .all(|(lp, alts)| alts.len() == top && f32::from_bits(*lp) <= 0.0)
        );
        assert_eq!(c.logprobs, a.logprobs, "request {i}");
        if top > 0 {
            let best = f32::from_bits(c.logprobs[0].1[0].1);
            assert!(f32::from_bits(c.logprobs[0].0) <= best);
        }
    }
    let mut e = engine(cfg, 1);
    let (p, gp) = &asks[0];
    let too_many = GenerateParams {
        logprobs: Some(21),
        ..gp.clone()
    };
    let err = e.submit(p.clone(), too_many, Box::new(|_| {})).unwrap_err();
    assert!(err.contains("at most 20"), "{err}");
}

#[test]
fn chunk_size_does_not_change_tokens() {
    let p = prompt(150, 7);
    let gp = params(0.7, Some(3), 5);
    let whole = solo(
        EngineConfig {
            token_budget: 512,
            prefix_cache: false,
            ..Default::default()
        },
        &p,
        &gp,
    );
    for budget in [1, 7, 64] {
        let chunked = solo(
            EngineConfig {
                token_budget: budget,
                prefix_cache: false,
                ..Default::default()
            },
            &p,
            &gp,
        );
        assert_eq!(chunked.sha, whole.sha, "budget {budget}");
    }
}

#[test]
fn resumed_prefix_equals_fresh() {
    let p = prompt(300, 8);
    let gp = params(1.0, Some(9), 5);
    let fresh = solo(
        EngineConfig {
            prefix_cache: false,
            ..Default::default()
        },
        &p,
        &gp,
    );
    let mut e = engine(EngineConfig::default(), 1);
    let first = submit(&mut e, p.clone(), gp.clone());
    drain(&mut e);
    let second = submit(&mut e, p.clone(), gp.clone());
    let mut longer = p.clone();
    longer.extend(prompt(20, 9));
    let third = submit(&mut e, longer.clone(), gp.clone());
    drain(&mut e);
    assert_eq!(first.lock().unwrap().sha, fresh.sha);
    let second = second.lock().unwrap();
    assert_eq!(second.usage.cached_tokens, 256, "two 128-token blocks resumed");
    assert_eq!(second.sha, fresh.sha, "resumed differs from fresh");
    let fresh_longer = solo(
        EngineConfig {
            prefix_cache: false,
            ..Default::default()
        },
        &longer,
        &gp,
    );
    assert_eq!(third.lock().unwrap().usage.cached_tokens, 256);
    assert_eq!(third.lock().unwrap().sha, fresh_longer.sha);
}

#[test]
fn preempted_background_request_replays_exactly() {
    let bg = prompt(60, 10);
    let fg = prompt(30, 11);
    let mut bg_params = params(1.0, Some(1), 12);
    bg_params.priority = Priority::Background;
    let fg_params = params(0.7, Some(2), 4);
    let cfg = EngineConfig {
        token_budget: 32,
        pool_blocks: common::pool(1),
        prefix_cache: false,
        ..Default::default()
    };
    let alone = solo(cfg, &bg, &bg_params);
    let mut e = engine(cfg, 1);
    let b = submit(&mut e, bg.clone(), bg_params.clone());
    for _ in 0..4 {
        e.step();
    }
    assert!(
        !b.lock().unwrap().tokens.is_empty(),
        "the background request started generating"
    );
    let f = submit(&mut e, fg.clone(), fg_params.clone());
    drain(&mut e);
    let b = b.lock().unwrap();
    assert_eq!(b.usage.preemptions, 1, "the foreground request preempted it");
    assert_eq!(b.sha, alone.sha, "replay changed the tokens");
    assert_eq!(b.tokens.len(), 12, "no token was sent twice");
    assert_eq!(f.lock().unwrap().sha, solo(cfg, &fg, &fg_params).sha);
}

#[test]
fn impossible_requests_are_refused_with_what_would_fit() {
    let mut e = engine(
        EngineConfig {
            pool_blocks: common::pool(1),
            ..Default::default()
        },
        1,
    );
    let err = e
        .submit(prompt(90, 1), params(0.0, None, 50), Box::new(|_| {}))
        .unwrap_err();
    assert!(err.contains("lower max_tokens to 38"), "{err}");
    assert!(err.contains("leaving 128 tokens"), "{err}");
    let err = e
        .submit(prompt(128, 1), params(0.0, None, 1), Box::new(|_| {}))
        .unwrap_err();
    assert!(err.contains("at most 127 fit"), "{err}");
    let err = e
        .submit(vec![200_000], params(0.0, None, 2), Box::new(|_| {}))
        .unwrap_err();
    assert!(err.contains("outside the vocabulary"), "{err}");
    let err = e
        .submit(Vec::new(), params(0.0, None, 2), Box::new(|_| {}))
        .unwrap_err();
    assert!(err.contains("empty"), "{err}");
}

#[test]
fn the_threaded_handle_streams_and_cancels() {
    let handle = tensorfold_engine::EngineHandle::spawn(engine(EngineConfig::default(), 1));
    let (tx, rx) = std::sync::mpsc::channel();
    let gp = params(0.7, Some(4), 200);
    let id = handle
        .submit(prompt(20, 3), gp, Box::new(move |ev| drop(tx.send(ev))))
        .unwrap();
    let mut tokens = 0;
    let reason = loop {
        match rx.recv().unwrap() {
            Event::Token { .. } => {
                tokens += 1;
                if tokens == 3 {
                    handle.cancel(id);
                }
            }
            Event::Finished { reason, usage, .. } => {
                assert_eq!(usage.completion_tokens, tokens);
                break reason;
            }
            Event::Error(e) => panic!("{e}"),
        }
    };
    assert_eq!(reason, FinishReason::Abort);
    assert!(tokens < 200);
    let freed = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let s = handle.stats();
        (s.running, s.blocks_used, s.blocks_reserved) == (0, 0, 0)
    });
    assert!(
        freed,
        "the cancelled request's blocks were not freed: {:?}",
        handle.stats()
    );
    let err = handle
        .submit(Vec::new(), params(0.0, None, 1), Box::new(|_| {}))
        .unwrap_err();
    assert!(err.contains("empty"));
    handle.shutdown();
}

#[test]
fn greedy_rounds_read_back_picks_and_draw_the_logits_tokens() {
    let p = prompt(40, 3);
    let greedy = params(0.0, None, 12);
    let mut e = engine(EngineConfig::default(), 1);
    let picked = submit(&mut e, p.clone(), greedy.clone());
    drain(&mut e);
    let stats = e.stats();
    assert!(stats.rounds > 0 && stats.picked_rounds == stats.rounds, "{stats:?}");
    // Log probabilities need the logits, so the same greedy request then runs on them.
    let mut e = engine(EngineConfig::default(), 1);
    let full = submit(
        &mut e,
        p,
        GenerateParams {
            logprobs: Some(2),
            ..greedy
        },
    );
    drain(&mut e);
    assert_eq!(e.stats().picked_rounds, 0);
    let (picked, full) = (picked.lock().unwrap().clone(), full.lock().unwrap().clone());
    assert_eq!(picked.tokens.len(), 12);
    assert_eq!((&picked.tokens, &picked.sha), (&full.tokens, &full.sha));
}
