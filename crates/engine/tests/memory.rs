//! Cache memory: the pool sized from a byte budget, refusals that say what fits in tokens, and resumed prefixes that draft from the pool alone.

mod common;

use common::{Done, drain, engine, prompt, submit};
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{DraftConfig, EngineConfig, GenerateParams};

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

fn run(cfg: EngineConfig, p: &[u32], gp: &GenerateParams) -> Done {
    let mut e = engine(cfg, 1);
    let d = submit(&mut e, p.to_vec(), gp.clone());
    drain(&mut e);
    d.lock().unwrap().clone()
}

#[test]
fn the_pool_is_sized_from_a_memory_budget_and_refusals_say_what_fits() {
    let layout = common::model().layout;
    let block = layout.bytes();
    let budget = |bytes: usize| EngineConfig {
        pool_blocks: layout.blocks_in(bytes as u64),
        ..Default::default()
    };
    // Three blocks for tokens, and those that cover a request's state outside them.
    let total = 3 + common::state_blocks();
    let mut e = engine(budget(total * block + block / 2), 1);
    let s = e.stats();
    assert_eq!((s.blocks_total, s.block_bytes), (total, block), "{s:?}");
    let err = e.submit(prompt(300, 31), params(1, 200), Box::new(|_| {})).unwrap_err();
    assert!(err.contains("at most 384 fit"), "{err}");
    assert!(err.contains("lower max_tokens to 84"), "{err}");
    assert!(err.contains("leaving 384 tokens"), "{err}");
    let d = submit(&mut e, prompt(300, 31), params(1, 20));
    e.step();
    assert!(
        e.stats().seq_state_bytes > 0,
        "a running request's open compression windows are counted"
    );
    drain(&mut e);
    assert_eq!(e.stats().seq_state_bytes, 0, "nothing is left outside the pool");
    let want = run(EngineConfig::default(), &prompt(300, 31), &params(1, 20));
    assert_eq!(d.lock().unwrap().sha, want.sha, "a budgeted pool changes no token");

    let mut tiny = engine(budget(block - 1), 1);
    assert_eq!(tiny.stats().blocks_total, 0);
    let err = tiny.submit(prompt(10, 32), params(2, 2), Box::new(|_| {})).unwrap_err();
    assert!(err.contains("holds no block") && err.contains("at least"), "{err}");
}

#[test]
fn a_resumed_prefix_drafts_with_the_mtp_layer_from_its_blocks() {
    let cfg = EngineConfig {
        drafts: DraftConfig {
            mtp_drafts: 2,
            context_drafts: 0,
        },
        ..Default::default()
    };
    let serial = EngineConfig {
        drafts: DraftConfig::off(),
        ..cfg
    };
    let first = prompt(256, 33);
    let mut follow = first.clone();
    follow.extend(prompt(9, 34));
    let gp = GenerateParams {
        draft: true,
        ..params(3, 24)
    };
    let mut e = engine(cfg, 1);
    let a = submit(&mut e, first.clone(), gp.clone());
    drain(&mut e);
    let b = submit(&mut e, follow.clone(), gp.clone());
    drain(&mut e);
    let (a, b) = (a.lock().unwrap().clone(), b.lock().unwrap().clone());
    assert_eq!(b.usage.cached_tokens, 256, "the follow-up resumed both blocks");
    assert_eq!(a.sha, run(serial, &first, &gp).sha);
    assert_eq!(b.sha, run(serial, &follow, &gp).sha, "resumed with MTP drafts");
    assert!(
        b.usage.drafted > 0,
        "the MTP layer resumed in step and drafted: {:?}",
        b.usage
    );
    let s = e.stats();
    assert_eq!((s.blocks_used, s.blocks_reserved), (0, 0), "{s:?}");
}

#[test]
fn blocks_and_the_state_outside_them_stay_within_the_pool() {
    let block = common::model().layout.bytes();
    let cfg = EngineConfig {
        pool_blocks: 6,
        token_budget: 96,
        drafts: DraftConfig {
            mtp_drafts: 2,
            context_drafts: 2,
        },
        ..Default::default()
    };
    let mut e = engine(cfg, 1);
    let shared = prompt(256, 35);
    let mut done = Vec::new();
    // Each request fills three blocks (a prompt and max_tokens of 384 tokens), so two of them would fill the pool.
    for i in 0..4u32 {
        let mut p = if i % 2 == 0 {
            shared.clone()
        } else {
            prompt(250 + 9 * i as usize, 36 + i)
        };
        p.extend(prompt(5 + i as usize, 40 + i));
        let gp = GenerateParams {
            draft: true,
            ignore_eos: true,
            ..params(10 + i as u64, 384 - p.len())
        };
        done.push(submit(&mut e, p, gp));
    }
    let (mut peak, mut over_pool, mut over_state) = (0, None, None);
    while e.has_work() {
        e.step();
        let s = e.stats();
        let held = (s.blocks_used + s.blocks_cached) * block + s.seq_state_bytes;
        peak = peak.max(s.seq_state_bytes);
        if held > s.blocks_total * block {
            over_pool.get_or_insert(s);
        }
        if s.seq_state_bytes > s.blocks_state * block {
            over_state.get_or_insert(s);
        }
    }
    assert_eq!(
        over_pool, None,
        "blocks and the state outside them took more than the pool"
    );
    assert_eq!(
        over_state, None,
        "state outside the blocks took more than the blocks held out for it"
    );
    assert!(peak > 0, "running requests held state outside their blocks");
    for d in &done {
        assert!(d.lock().unwrap().reason.is_some(), "every request finished");
    }
    let s = e.stats();
    assert_eq!((s.blocks_used, s.blocks_state, s.blocks_reserved), (0, 0, 0), "{s:?}");
}
