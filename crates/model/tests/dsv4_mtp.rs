//! The MTP layer against a float64 recomputation fed the engine's main-model streams, and its chunking invariance.

mod f64ref;

use std::sync::OnceLock;

use f64ref::{MtpRef, Roundings};
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::Dsv4Checkpoint;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::semantics::Semantics;
use tensorfold_model::dsv4::weights::Dsv4Weights;
use tensorfold_model::synth::{self, Preset, SynthOptions};

/// MTP rows: more than the tiny model's 32-token window, so the MTP layer's window slides.
const ROWS: usize = 40;

/// Rows before any rounding flip: f32 sums in another order than f64's, a few ulp at 2^-24 through the layer.
const REL_BOUND: f64 = 1e-5;

/// Rows from an FP8 flip on, under official semantics: it cascades through later FP8 roundings and can reroute experts.
const OFFICIAL_FLIP_BOUND: f64 = 0.5;

/// The same without act-quantised GEMM inputs: a KV FP8 or bf16 probability flip only carries linearly, ~1e-3 a row.
const PLAIN_FLIP_BOUND: f64 = 1e-2;

/// A flip needs a rounding within f32's error of a tie, rare enough per row that the first rows must all agree.
const MIN_CLEAR_ROWS: usize = 8;

fn model(semantics: Semantics) -> Dsv4Model {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let opts = SynthOptions {
            preset: Preset::Tiny,
            seed: 5,
            out: dir.path().to_path_buf(),
            shard_bytes: synth::DEFAULT_SHARD_BYTES,
            chat_template: true,
            force: false,
        };
        synth::write(&opts).unwrap();
        dir
    });
    let ckpt = Dsv4Checkpoint::open(dir.path()).unwrap();
    let weights = Dsv4Weights::new(&ckpt.weights, &ckpt.config);
    Dsv4Model::new(ckpt.config, weights, semantics)
}

/// `ROWS + 1` token ids: the main model reads the first `ROWS`, the MTP layer the last `ROWS`.
fn tokens() -> Vec<u32> {
    (0..ROWS as u32 + 1)
        .map(|i| (i * 7919 + 104_729) % 129_000 + 3)
        .collect()
}

/// The main model's last-layer streams over the first `ROWS` tokens, and the cache it leaves.
fn main_pass(m: &Dsv4Model) -> (Vec<f32>, Dsv4Cache) {
    let mut cache = Dsv4Cache::default();
    let mut batch = Batch::default();
    batch.push_seq(SeqSlot(0), 0, &tokens()[..ROWS]);
    let out = m.forward(&batch, &mut cache, CpuLaunch::serial(), false).unwrap();
    (out.last_streams, cache)
}

/// The engine's MTP logits fed in chunks of the given sizes, one call each.
fn mtp_chunks(m: &Dsv4Model, streams: &[f32], cache: &Dsv4Cache, sizes: &[usize]) -> Vec<f32> {
    let (n, next) = (m.config.hc_mult * m.config.hidden_size, &tokens()[1..]);
    let mut cache = cache.clone();
    let (mut logits, mut start) = (Vec::new(), 0);
    for &size in sizes {
        let mut batch = Batch::default();
        batch.push_seq(SeqSlot(0), start as u32, &next[start..start + size]);
        let s = &streams[start * n..(start + size) * n];
        logits.extend(m.forward_mtp(0, &batch, s, &mut cache, CpuLaunch::serial()).unwrap());
        start += size;
    }
    assert_eq!(start, ROWS, "chunk sizes must cover every row");
    logits
}

fn argmax<T: Copy + PartialOrd>(row: &[T]) -> usize {
    (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b })
}

/// The gap between a row's two largest values.
fn top_gap(row: &[f64]) -> f64 {
    let best = argmax(row);
    let second = row
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != best)
        .fold(f64::NEG_INFINITY, |m, (_, &v)| m.max(v));
    row[best] - second
}

/// One row's comparison: squared error and reference norms, largest abs error, engine and f64 argmax, f64 top gap.
struct RowErr {
    sq_err: f64,
    sq_ref: f64,
    max_abs: f64,
    argmax: (usize, usize),
    gap: f64,
}

impl RowErr {
    fn new(g: &[f32], w: &[f64]) -> RowErr {
        RowErr {
            sq_err: g.iter().zip(w).map(|(&a, b)| (a as f64 - b).powi(2)).sum(),
            sq_ref: w.iter().map(|b| b * b).sum(),
            max_abs: g.iter().zip(w).fold(0f64, |m, (&a, b)| m.max((a as f64 - b).abs())),
            argmax: (argmax(g), argmax(w)),
            gap: top_gap(w),
        }
    }

    fn rel(&self) -> f64 {
        (self.sq_err / self.sq_ref).sqrt()
    }
}

/// Engine (`semantics`) vs f64 (`roundings`): rows within `REL_BOUND` up to a late flip at a tie, then `flip_bound`.
fn check(semantics: Semantics, roundings: Roundings, flip_bound: f64, label: &str) {
    let m = model(semantics);
    let vocab = m.config.vocab_size;
    let (streams, cache) = main_pass(&m);
    let got = mtp_chunks(&m, &streams, &cache, &[ROWS]);
    let want = MtpRef::new(&m, 0, roundings).logits(&tokens()[1..], &streams);
    let rows: Vec<RowErr> = got
        .chunks(vocab)
        .zip(want.logits.chunks(vocab))
        .map(|(g, w)| RowErr::new(g, w))
        .collect();
    let first_off = rows.iter().position(|e| e.rel() > REL_BOUND).unwrap_or(ROWS);
    let mut failures = Vec::new();
    for (r, e) in rows.iter().enumerate() {
        let tie = if want.near_tie[r] { " (rounding near a tie)" } else { "" };
        eprintln!(
            "{label}: row {r:2}{tie} rel err {:.2e}, max abs {:.2e}, argmax {}/{}, f64 top gap {:.2e}",
            e.rel(),
            e.max_abs,
            e.argmax.0,
            e.argmax.1,
            e.gap
        );
        // Before any flip the argmax may only move where the f64 top-two gap is within twice the row's largest error.
        if r < first_off && e.argmax.0 != e.argmax.1 && e.gap > 2.0 * e.max_abs {
            failures.push(format!("row {r}: argmax {} vs f64 {}", e.argmax.0, e.argmax.1));
        }
        if r >= first_off && e.rel() > flip_bound {
            failures.push(format!(
                "row {r}: rel err {:.2e} over {flip_bound:.0e} after a flip",
                e.rel()
            ));
        }
    }
    let max = |range: std::ops::Range<usize>| rows[range].iter().fold(0f64, |m, e| m.max(e.rel()));
    let overall = (rows.iter().map(|e| e.sq_err).sum::<f64>() / rows.iter().map(|e| e.sq_ref).sum::<f64>()).sqrt();
    eprintln!(
        "{label}: overall rel err {overall:.2e}; {first_off} rows within {REL_BOUND:.0e} (max row rel err {:.2e}), max \
         row rel err after {:.2e}; {} roundings near a tie",
        max(0..first_off),
        max(first_off..ROWS),
        want.num_ties
    );
    if first_off < ROWS {
        // A flip shows first in its own row, or (through a KV too small to show there) in a later one of its window.
        let seen = first_off.saturating_sub(m.config.sliding_window - 1)..=first_off;
        let why = if first_off < MIN_CLEAR_ROWS {
            Some("too early for a rounding flip")
        } else if !want.near_tie[seen].contains(&true) {
            Some("with no rounding near a tie in its window")
        } else {
            None
        };
        if let Some(why) = why {
            failures.push(format!("row {first_off} is off by {:.2e} {why}", rows[first_off].rel()));
        }
    }
    assert!(failures.is_empty(), "{label}: {failures:?}");
}

#[test]
fn mtp_logits_match_f64_with_official_semantics() {
    check(
        Semantics::official(),
        Roundings::OFFICIAL,
        OFFICIAL_FLIP_BOUND,
        "official",
    );
}

#[test]
fn mtp_logits_match_f64_without_gemm_act_quant() {
    let semantics = Semantics {
        act_quant_gemm_inputs: false,
        ..Semantics::official()
    };
    let roundings = Roundings {
        gemm_inputs: false,
        wo_a_input: false,
        ..Roundings::OFFICIAL
    };
    check(semantics, roundings, PLAIN_FLIP_BOUND, "no act_quant");
}

#[test]
fn mtp_chunks_give_the_same_bits() {
    let m = model(Semantics::official());
    let (streams, cache) = main_pass(&m);
    let whole: Vec<u32> = mtp_chunks(&m, &streams, &cache, &[ROWS])
        .iter()
        .map(|v| v.to_bits())
        .collect();
    for sizes in [vec![1, ROWS - 1], vec![7, 7, 7, 7, 7, 5], vec![1; ROWS]] {
        let bits: Vec<u32> = mtp_chunks(&m, &streams, &cache, &sizes)
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert!(bits == whole, "MTP chunks {sizes:?} differ from one chunk");
    }
}
