//! V4.1 resume from blocks alone: a sequence rebuilt from another's blocks at a boundary (windows, entries, Engram token ids) runs on bit-equal to it.

mod common;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::blocks::BLOCK_TOKENS;
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::ForwardOptions;
use tensorfold_model::dsv41::forward::Dsv41Model;

const RAN: SeqSlot = SeqSlot(0);
const RESUMED: SeqSlot = SeqSlot(1);

fn model() -> Dsv41Model {
    common::tiny_dsv41(6)
}

fn tokens(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 7919 + 31_337) % 129_000 + 3).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn feed(m: &Dsv41Model, cache: &mut Dsv4Cache, seq: SeqSlot, tokens: &[u32]) -> Vec<f32> {
    let mut batch = Batch::default();
    batch.push_seq(seq, cache.seqs.get(&seq).map_or(0, |s| s.len), tokens);
    m.forward_with(&batch, cache, CpuLaunch::serial(), &ForwardOptions::default())
        .unwrap()
        .logits
}

#[test]
fn a_v41_sequence_resumed_from_blocks_alone_runs_on_bit_equal() {
    let m = model();
    assert!(m.layout.tokens.is_some(), "the tiny preset has Engram layers");
    let boundary = 2 * BLOCK_TOKENS;
    let t = tokens(boundary + 23);
    let mut cache = Dsv4Cache::default();
    // Chunks that cut a ratio-2 pair and the window, ending at the boundary.
    feed(&m, &mut cache, RAN, &t[..77]);
    feed(&m, &mut cache, RAN, &t[77..boundary]);
    let captured = cache.capture(RAN, &m.config, &m.layout);
    let table = cache.table(RAN).to_vec();
    assert_eq!(
        cache.store.floats_held(),
        table.len() * m.layout.floats,
        "the store holds two whole blocks and nothing else"
    );
    let want_state = cache.seqs[&RAN].clone();
    cache.resume(RESUMED, table, captured, &m.config, &m.layout);
    assert_eq!(
        cache.seqs[&RESUMED], want_state,
        "the blocks rebuild the state kept outside them, token ids included"
    );
    let next = &t[boundary..];
    let want = feed(&m, &mut cache, RAN, next);
    let got = feed(&m, &mut cache, RESUMED, next);
    assert!(bits(&got) == bits(&want), "the resumed sequence's logits differ");
}
