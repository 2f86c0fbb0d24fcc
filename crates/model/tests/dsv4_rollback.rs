//! Draft rollback: rows run under a mark and settled back equal a serial run that only saw the kept tokens.

mod common;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::{Dsv4Cache, SeqCache, Stage};
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions};
use tensorfold_model::dsv4::semantics::Semantics;

const SEQ: SeqSlot = SeqSlot(0);

fn model() -> Dsv4Model {
    common::tiny_dsv4(3, Semantics::official())
}

fn tokens(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 7919 + salt * 104_729) % 129_000 + 3)
        .collect()
}

/// Runs `tokens` from the sequence's position in one batch; logits of every row when `logits`, and the last-layer streams.
fn feed(m: &Dsv4Model, cache: &mut Dsv4Cache, tokens: &[u32], logits: bool) -> (Vec<f32>, Vec<f32>) {
    let start = cache.seqs.get(&SEQ).map_or(0, |s| s.len);
    let mut batch = Batch::default();
    batch.push_seq(SEQ, start, tokens);
    let opts = ForwardOptions {
        keep_layers: false,
        logit_rows: (!logits).then(Vec::new),
        ..ForwardOptions::default()
    };
    let out = m.forward_with(&batch, cache, CpuLaunch::serial(), &opts).unwrap();
    (out.logits, out.last_streams)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The state after `tokens[..start]` in one chunk, then `tokens[start..keep]` one token at a time.
fn serial(m: &Dsv4Model, tokens: &[u32], start: usize, keep: usize) -> Dsv4Cache {
    let mut cache = Dsv4Cache::default();
    feed(m, &mut cache, &tokens[..start], false);
    for t in &tokens[start..keep] {
        feed(m, &mut cache, std::slice::from_ref(t), false);
    }
    cache
}

/// Runs `rows` rows from `start` under a mark, the rows after `keep` with wrong tokens, and settles at `keep`.
fn drafted(m: &Dsv4Model, tokens: &[u32], start: usize, rows: usize, keep: usize) -> Dsv4Cache {
    let mut cache = Dsv4Cache::default();
    feed(m, &mut cache, &tokens[..start], false);
    let mut run: Vec<u32> = tokens[start..start + rows].to_vec();
    for (i, t) in run.iter_mut().enumerate() {
        if start + i >= keep {
            *t = (*t + 17) % 129_000;
        }
    }
    cache.mark(SEQ, Stage::Main, rows, &m.config, &m.layout);
    feed(m, &mut cache, &run, true);
    cache.settle(SEQ, keep as u32, &m.config, &m.layout);
    cache
}

/// Settled state equals the serial state, and both give the same logit bits for what follows.
fn check(m: &Dsv4Model, start: usize, rows: usize, keep: usize) {
    let t = tokens(start + rows + 4, 1);
    let mut want = serial(m, &t, start, keep);
    let mut got = drafted(m, &t, start, rows, keep);
    let label = format!("start {start}, rows {rows}, keep {keep}");
    let (w, g) = (&want.seqs[&SEQ], &got.seqs[&SEQ]);
    assert_eq!(g.len, keep as u32, "{label}");
    assert!(g.mark.is_none(), "{label}: the mark was dropped");
    for (l, (gl, wl)) in g.layers.iter().zip(&w.layers).enumerate() {
        let window = |c: &Dsv4Cache| bits(&c.window_rows(SEQ, l, &m.config, &m.layout));
        assert!(window(&got) == window(&want), "{label}: layer {l} window differs");
        assert_eq!(gl.compressor, wl.compressor, "{label}: layer {l} compressor differs");
        assert_eq!(gl.indexer, wl.indexer, "{label}: layer {l} indexer differs");
    }
    assert_eq!(g, w, "{label}");
    let next = &t[keep..keep + 3];
    let (a, _) = feed(m, &mut want, next, true);
    let (b, _) = feed(m, &mut got, next, true);
    assert!(bits(&a) == bits(&b), "{label}: logits after the rollback differ");
}

#[test]
fn rollback_equals_a_serial_run_of_the_kept_tokens() {
    let m = model();
    assert_eq!(m.config.compress_ratios[..4], [0, 4, 128, 4], "tiny's layer plan");
    // Ratio-4 entries finish at lengths 8 and 12 inside the rejected rows; one case keeps everything, one nothing.
    for (start, rows, keep) in [(5, 8, 7), (5, 8, 13), (5, 8, 5), (6, 4, 9), (40, 6, 41)] {
        check(&m, start, rows, keep);
    }
}

#[test]
fn a_ratio_128_window_finishing_in_the_rejected_rows_is_undone() {
    let m = model();
    // Length 128 finishes the first 128-token entry (and a ratio-4 one); the window ring has wrapped four times.
    for (start, rows, keep) in [(125, 5, 127), (126, 3, 126), (127, 4, 128), (120, 16, 130)] {
        check(&m, start, rows, keep);
    }
}

#[test]
fn mtp_rows_settle_back_to_the_mark() {
    let m = model();
    let t = tokens(60, 2);
    let d = m.config.hc_mult * m.config.hidden_size;
    let mut cache = Dsv4Cache::default();
    let (_, streams) = feed(&m, &mut cache, &t[..50], false);
    let mut batch = Batch::default();
    batch.push_seq(SEQ, 0, &t[1..50]);
    let opts = ForwardOptions::default();
    m.forward_mtp_with(0, &batch, &streams[..49 * d], &mut cache, CpuLaunch::serial(), &opts)
        .unwrap();
    let before: SeqCache = cache.seqs[&SEQ].clone();
    let layer = m.config.num_hidden_layers;
    let window = |c: &Dsv4Cache| bits(&c.window_rows(SEQ, layer, &m.config, &m.layout));
    let window_before = window(&cache);
    cache.mark(SEQ, Stage::Mtp(0), 3, &m.config, &m.layout);
    let mut stream = streams[49 * d..].to_vec();
    for (i, &tok) in t[50..53].iter().enumerate() {
        let mut b = Batch::default();
        b.push_seq(SEQ, 49 + i as u32, &[tok]);
        stream = m
            .forward_mtp_with(0, &b, &stream, &mut cache, CpuLaunch::serial(), &opts)
            .unwrap()
            .last_streams;
    }
    assert_eq!(cache.seqs[&SEQ].mtp_len, vec![52]);
    cache.seqs.get_mut(&SEQ).unwrap().mtp_len[0] = 49;
    assert_ne!(
        window(&cache),
        window_before,
        "the chained rows wrote over the MTP window"
    );
    cache.seqs.get_mut(&SEQ).unwrap().mtp_len[0] = 52;
    cache.settle(SEQ, 49, &m.config, &m.layout);
    assert_eq!(cache.seqs[&SEQ], before);
    assert_eq!(window(&cache), window_before, "the MTP window rows are back");
}
