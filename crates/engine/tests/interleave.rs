//! Random interleavings of submit, cancel and stepping never lose, duplicate or reorder a token; stop token ids.

mod common;

use std::collections::HashMap;

use common::{Done, Rec, drain, engine, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{
    DraftConfig, Engine, EngineConfig, EngineHandle, Event, FinishReason, GenerateParams, Priority, RequestId,
    token_sha,
};

/// xorshift64: a seeded source for the interleavings.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn random_request(rng: &mut Rng) -> (Vec<u32>, GenerateParams) {
    let mut p = if rng.below(3) == 0 { prompt(128, 77) } else { Vec::new() };
    p.extend(prompt(1 + rng.below(40) as usize, rng.below(5) as u32));
    let gp = GenerateParams {
        sampling: SamplingParams {
            temperature: [0.0, 0.7, 1.0][rng.below(3) as usize],
            top_k: [0, 7][rng.below(2) as usize],
            top_p: [1.0, 0.8][rng.below(2) as usize],
            min_p: [0.0, 0.1][rng.below(2) as usize],
        },
        seed: (rng.below(2) == 0).then(|| rng.below(1000)),
        max_tokens: 1 + rng.below(6) as usize,
        priority: if rng.below(4) == 0 {
            Priority::Background
        } else {
            Priority::Foreground
        },
        ..Default::default()
    };
    (p, gp)
}

/// Each request alone on an engine with prefix reuse off (nothing carries over between requests), memoised.
struct Solo {
    engine: Engine,
    seen: HashMap<String, Done>,
}

impl Solo {
    fn new() -> Solo {
        let cfg = EngineConfig {
            prefix_cache: false,
            ..Default::default()
        };
        Solo {
            engine: engine(cfg, 1),
            seen: HashMap::new(),
        }
    }

    fn run(&mut self, p: &[u32], gp: &GenerateParams) -> Done {
        let e = &mut self.engine;
        self.seen
            .entry(format!("{p:?}{gp:?}"))
            .or_insert_with(|| {
                let d = submit(e, p.to_vec(), gp.clone());
                drain(e);
                d.lock().unwrap().clone()
            })
            .clone()
    }
}

#[test]
fn random_interleavings_never_lose_or_duplicate_a_token() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut solo = Solo::new();
    let (mut cancelled, mut finished, mut refused, mut preempted) = (0, 0, 0, 0);
    for trial in 0..8 {
        let cfg = EngineConfig {
            token_budget: 8 + rng.below(120) as usize,
            max_lanes: 1 + rng.below(6) as usize,
            pool_blocks: common::pool(1 + rng.below(3) as usize),
            prefix_cache: rng.below(3) != 0,
            drafts: [
                DraftConfig::default(),
                DraftConfig::off(),
                DraftConfig {
                    mtp_drafts: 3,
                    context_drafts: 4,
                },
            ][trial % 3],
        };
        let mut e = engine(cfg, 1);
        let mut reqs: Vec<(RequestId, Vec<u32>, GenerateParams, Rec)> = Vec::new();
        for _ in 0..60 {
            match rng.below(10) {
                0..=2 => {
                    let (p, gp) = random_request(&mut rng);
                    let (rec, sink) = common::recorder();
                    match e.submit(p.clone(), gp.clone(), sink) {
                        Ok(id) => reqs.push((id, p, gp, rec)),
                        Err(_) => refused += 1,
                    }
                }
                3 | 4 if !reqs.is_empty() => {
                    let i = rng.below(reqs.len() as u64) as usize;
                    e.abort(reqs[i].0);
                }
                _ => {
                    e.step();
                }
            }
            let s = e.stats();
            assert!(s.blocks_used <= s.blocks_reserved, "trial {trial}: {s:?}");
            assert!(s.blocks_reserved <= s.blocks_total, "trial {trial}: {s:?}");
        }
        drain(&mut e);
        let s = e.stats();
        preempted += s.preemptions;
        assert_eq!(
            (s.running, s.waiting, s.blocks_reserved, s.blocks_used),
            (0, 0, 0, 0),
            "trial {trial}: {s:?}"
        );
        for (id, p, gp, rec) in &reqs {
            let d = rec.lock().unwrap();
            let what = format!("trial {trial}, {id:?}");
            assert!(d.errors.is_empty(), "{what}: {:?}", d.errors);
            assert_eq!(
                (d.ends, d.late),
                (1, 0),
                "{what}: exactly one terminal event, nothing after"
            );
            let from = p.len() as u32;
            let n = d.tokens.len() as u32;
            assert_eq!(d.positions, (from..from + n).collect::<Vec<_>>(), "{what}: positions");
            assert_eq!(d.usage.completion_tokens, d.tokens.len(), "{what}");
            assert_eq!(d.sha, token_sha(&d.tokens), "{what}");
            let want = solo.run(p, gp);
            match d.reason {
                Some(FinishReason::Length) => {
                    finished += 1;
                    assert_eq!(d.tokens, want.tokens, "{what}: differs from alone");
                }
                Some(FinishReason::Abort) => {
                    cancelled += 1;
                    assert_eq!(
                        d.tokens[..],
                        want.tokens[..d.tokens.len()],
                        "{what}: not a prefix of alone"
                    );
                }
                other => panic!("{what}: finished with {other:?}"),
            }
        }
    }
    eprintln!("cancelled {cancelled}, finished {finished}, refused {refused}, preempted {preempted}");
    assert!(cancelled > 20 && finished > 30 && preempted > 0);
}

#[test]
fn a_stop_token_ends_the_request_and_ignore_eos_keeps_going() {
    let p = prompt(20, 42);
    let base = GenerateParams {
        sampling: SamplingParams::greedy(),
        max_tokens: 8,
        ..Default::default()
    };
    let mut e = engine(EngineConfig::default(), 1);
    let free = submit(&mut e, p.clone(), base.clone());
    drain(&mut e);
    let free = free.lock().unwrap().clone();
    assert_eq!(free.reason, Some(FinishReason::Length));
    let stop = free.tokens[2];
    let cut = free.tokens.iter().position(|&t| t == stop).unwrap() + 1;
    let stopping = GenerateParams {
        stop_token_ids: vec![999_999, stop],
        ..base.clone()
    };
    let stopped = submit(&mut e, p.clone(), stopping.clone());
    let ignoring = submit(
        &mut e,
        p.clone(),
        GenerateParams {
            ignore_eos: true,
            ..stopping
        },
    );
    drain(&mut e);
    let stopped = stopped.lock().unwrap();
    assert_eq!(stopped.reason, Some(FinishReason::Stop));
    assert_eq!(
        stopped.tokens,
        free.tokens[..cut],
        "ends on (and includes) the stop token"
    );
    assert_eq!(stopped.usage.completion_tokens, cut);
    let ignoring = ignoring.lock().unwrap();
    assert_eq!(ignoring.reason, Some(FinishReason::Length));
    assert_eq!(ignoring.sha, free.sha, "ignore_eos runs to max_tokens");
    assert_eq!((e.stats().blocks_reserved, e.stats().blocks_used), (0, 0));
}

#[test]
fn background_work_is_preempted_only_when_that_makes_room() {
    let cfg = EngineConfig {
        token_budget: 128,
        pool_blocks: common::pool(3),
        prefix_cache: false,
        ..Default::default()
    };
    let greedy = |max_tokens, priority| GenerateParams {
        sampling: SamplingParams::greedy(),
        max_tokens,
        priority,
        ..Default::default()
    };
    let mut e = engine(cfg, 1);
    // The background request ends before the foreground one, so the big one never needs to preempt it.
    let fg = submit(&mut e, prompt(30, 1), greedy(20, Priority::Foreground));
    let bg = submit(&mut e, prompt(30, 2), greedy(10, Priority::Background));
    e.step();
    // Three blocks: preempting the one-block background request would leave two.
    let big = submit(&mut e, prompt(300, 3), greedy(10, Priority::Foreground));
    drain(&mut e);
    for d in [&fg, &bg, &big] {
        assert_eq!(d.lock().unwrap().reason, Some(FinishReason::Length));
    }
    assert_eq!(
        e.stats().preemptions,
        0,
        "preempting the background request could not make room for the big one while the other ran"
    );
}

#[test]
fn a_large_waiting_request_is_not_passed_over_forever_by_small_ones() {
    let cfg = EngineConfig {
        token_budget: 256,
        pool_blocks: common::pool(3),
        prefix_cache: false,
        ..Default::default()
    };
    let greedy = |max_tokens| GenerateParams {
        sampling: SamplingParams::greedy(),
        max_tokens,
        ..Default::default()
    };
    let mut e = engine(cfg, 1);
    let first = submit(&mut e, prompt(20, 1), greedy(30));
    e.step();
    // Three blocks: it fits only once the first request's block is free; each small one needs one.
    let big = submit(&mut e, prompt(300, 2), greedy(10));
    let mut small = Vec::new();
    for i in 0..60 {
        small.push(submit(&mut e, prompt(10, 10 + i), greedy(10)));
        e.step();
    }
    assert_eq!(first.lock().unwrap().reason, Some(FinishReason::Length));
    assert_eq!(
        big.lock().unwrap().reason,
        Some(FinishReason::Length),
        "the big request waited behind later small ones"
    );
    drain(&mut e);
    assert!(
        small
            .iter()
            .all(|d| d.lock().unwrap().reason == Some(FinishReason::Length))
    );
}

#[test]
fn clients_on_several_threads_submit_and_cancel_through_the_handle() {
    let handle = EngineHandle::spawn(engine(
        EngineConfig {
            token_budget: 64,
            pool_blocks: common::pool(3),
            ..Default::default()
        },
        1,
    ));
    let clients: Vec<_> = (0..3u64)
        .map(|c| {
            let handle = handle.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234_5678 + c);
                let mut out = Vec::new();
                for i in 0..5 {
                    let (p, gp) = random_request(&mut rng);
                    let (tx, rx) = std::sync::mpsc::channel();
                    let id = handle
                        .submit(p.clone(), gp.clone(), Box::new(move |ev| drop(tx.send(ev))))
                        .unwrap();
                    out.push((id, p, gp, rx, i % 3 == 0));
                }
                out.into_iter()
                    .map(|(id, p, gp, rx, cancel)| {
                        let (rec, mut sink) = common::recorder();
                        loop {
                            let ev = rx.recv().unwrap();
                            let end = !matches!(ev, Event::Token { .. });
                            if cancel && !end {
                                handle.cancel(id);
                            }
                            sink(ev);
                            if end {
                                break;
                            }
                        }
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        assert!(rx.try_recv().is_err(), "an event after the terminal one");
                        (p, gp, rec)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut solo = Solo::new();
    for client in clients {
        for (p, gp, rec) in client.join().unwrap() {
            let d = rec.lock().unwrap();
            assert!(d.errors.is_empty(), "{:?}", d.errors);
            let from = p.len() as u32;
            assert_eq!(d.positions, (from..from + d.tokens.len() as u32).collect::<Vec<_>>());
            let want = solo.run(&p, &gp);
            assert_eq!(d.tokens[..], want.tokens[..d.tokens.len()]);
            if d.reason == Some(FinishReason::Length) {
                assert_eq!(d.sha, want.sha);
            }
        }
    }
    let settled = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let s = handle.stats();
        (s.running, s.waiting, s.blocks_reserved, s.blocks_used) == (0, 0, 0, 0)
    });
    assert!(settled, "{:?}", handle.stats());
    handle.shutdown();
}
