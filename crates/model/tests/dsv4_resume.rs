//! Resume from blocks alone: a sequence rebuilt from another's blocks at a boundary runs on bit-equal to it, main and MTP layers, and whole blocks hold every float of the state.

mod common;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::blocks::BLOCK_TOKENS;
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions};
use tensorfold_model::dsv4::semantics::Semantics;

const RAN: SeqSlot = SeqSlot(0);
const RESUMED: SeqSlot = SeqSlot(1);

fn model() -> Dsv4Model {
    common::tiny_dsv4(4, Semantics::official())
}

fn tokens(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 7919 + 31_337) % 129_000 + 3).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Main layers on `tokens` from `seq`'s position: logits and last-layer streams of every row.
fn feed(m: &Dsv4Model, cache: &mut Dsv4Cache, seq: SeqSlot, tokens: &[u32]) -> (Vec<f32>, Vec<f32>) {
    let mut batch = Batch::default();
    batch.push_seq(seq, cache.seqs.get(&seq).map_or(0, |s| s.len), tokens);
    let out = m
        .forward_with(&batch, cache, CpuLaunch::serial(), &ForwardOptions::default())
        .unwrap();
    (out.logits, out.last_streams)
}

/// The MTP layer on `next` (the tokens after its positions) with the main streams of those positions.
fn feed_mtp(m: &Dsv4Model, cache: &mut Dsv4Cache, seq: SeqSlot, next: &[u32], streams: &[f32]) -> Vec<f32> {
    let mut batch = Batch::default();
    batch.push_seq(seq, cache.seqs[&seq].mtp_len[0], next);
    m.forward_mtp(0, &batch, streams, cache, CpuLaunch::serial()).unwrap()
}

#[test]
fn a_sequence_resumed_from_blocks_alone_runs_on_bit_equal() {
    let m = model();
    let boundary = 2 * BLOCK_TOKENS;
    let t = tokens(boundary + 41);
    let width = m.config.hc_mult * m.config.hidden_size;
    let mut cache = Dsv4Cache::default();
    // Chunks that cut a ratio-4 window and the 32-token window, ending at the boundary.
    let (_, s1) = feed(&m, &mut cache, RAN, &t[..101]);
    let (_, s2) = feed(&m, &mut cache, RAN, &t[101..boundary]);
    let streams = [s1, s2].concat();
    // The MTP layer follows one position behind, as the engine's drafter keeps it.
    feed_mtp(&m, &mut cache, RAN, &t[1..boundary], &streams[..(boundary - 1) * width]);
    cache.seqs.get_mut(&RAN).unwrap().mtp_stream = streams[(boundary - 1) * width..].to_vec();

    let captured = cache.capture(RAN, &m.config, &m.layout);
    assert!(captured.mtp_synced, "the MTP layer stood one position behind");
    let table = cache.table(RAN).to_vec();
    assert_eq!(table.len(), 2);
    assert_eq!(
        cache.store.floats_held(),
        table.len() * m.layout.floats,
        "the store holds two whole blocks and nothing else"
    );
    cache.resume(RESUMED, table, captured, &m.config, &m.layout);
    assert_eq!(
        cache.seqs[&RESUMED], cache.seqs[&RAN],
        "the blocks rebuild all the state kept outside them"
    );

    let next = &t[boundary..boundary + 40];
    let (want, want_streams) = feed(&m, &mut cache, RAN, next);
    let (got, got_streams) = feed(&m, &mut cache, RESUMED, next);
    assert!(bits(&got) == bits(&want), "the resumed sequence's logits differ");
    assert_eq!(
        cache.table(RESUMED)[..2],
        cache.table(RAN)[..2],
        "the prefix blocks are shared"
    );
    assert_ne!(
        cache.table(RESUMED)[2],
        cache.table(RAN)[2],
        "each writes its own next block"
    );

    // The MTP layer runs position boundary - 1 from the captured stream, then the new rows.
    let mtp = |cache: &mut Dsv4Cache, seq: SeqSlot, new_streams: &[f32]| {
        let stream = cache.seqs[&seq].mtp_stream.clone();
        let rows = [stream.as_slice(), &new_streams[..39 * width]].concat();
        feed_mtp(&m, cache, seq, &t[boundary..boundary + 40], &rows)
    };
    let want_mtp = mtp(&mut cache, RAN, &want_streams);
    let got_mtp = mtp(&mut cache, RESUMED, &got_streams);
    assert!(
        bits(&got_mtp) == bits(&want_mtp),
        "the resumed MTP layer's logits differ"
    );
}

#[test]
fn a_boundary_without_the_mtp_layer_resumes_without_it() {
    let m = model();
    let t = tokens(BLOCK_TOKENS + 5);
    let mut cache = Dsv4Cache::default();
    feed(&m, &mut cache, RAN, &t[..BLOCK_TOKENS]);
    let captured = cache.capture(RAN, &m.config, &m.layout);
    assert!(!captured.mtp_synced);
    cache.resume(RESUMED, cache.table(RAN).to_vec(), captured, &m.config, &m.layout);
    assert_eq!(cache.seqs[&RESUMED], cache.seqs[&RAN]);
    let (want, _) = feed(&m, &mut cache, RAN, &t[BLOCK_TOKENS..]);
    let (got, _) = feed(&m, &mut cache, RESUMED, &t[BLOCK_TOKENS..]);
    assert!(bits(&got) == bits(&want));
}
