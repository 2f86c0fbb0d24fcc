//! 16-row groups: a weight laid out so one 64-byte vector holds the same 32-bit word of 16 rows, and a row's sums stay in one lane.

use crate::cpu::CpuLaunch;
use crate::faults::Faults;

/// Rows a group holds side by side.
pub const ROWS: usize = 16;

/// Bytes ahead that each vector load of a packed kernel asks L1 for, and (second) L2.
pub const AHEAD: (usize, usize) = (2048, 32768);

/// Activation rows whose outputs one sweep over a group's weights computes, unless the launch's tiles are smaller.
const SWEEP_ROWS: usize = 64;

/// A packed GEMM call's work units (as `split_threads` counts them) and planted controls.
pub struct Call {
    /// Work units of the whole call.
    pub work: usize,
    /// The call's planted controls.
    pub faults: Faults,
}

/// `out[r, n]` of a packed weight's GEMM: threads split whole groups and `group(prep, r, g, dst)` writes row r's 16 outputs of group g; a one-row call's threads each run `prep` (activations made in their own cache as soon as they wake), a longer call's caller runs it once; the control `skip_last_column` keeps each row's last output.
pub fn run_groups<S: Sync>(
    rows: usize,
    n: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    call: Call,
    prep: impl Fn() -> S + Sync,
    group: impl Fn(&S, usize, usize, &mut [f32]) + Sync,
) {
    assert!(n.is_multiple_of(ROWS) && out.len() == rows * n);
    let keep: Vec<f32> = (0..rows).map(|r| out[r * n + n - 1]).collect();
    // One-row calls prepare on each thread, longer ones once on the caller.
    let shared = (rows > 1).then(&prep);
    let tile = launch.tile_rows.clamp(1, SWEEP_ROWS);
    super::par_columns(out, rows, n, launch.split_threads(call.work), ROWS, |cols, view| {
        let own;
        let prepared = match &shared {
            Some(s) => s,
            None => {
                own = prep();
                &own
            }
        };
        let width = cols.len();
        for t0 in (0..rows).step_by(tile) {
            for g in cols.clone().step_by(ROWS) {
                for r in t0..(t0 + tile).min(rows) {
                    group(prepared, r, g / ROWS, &mut view[r * width + g - cols.start..][..ROWS]);
                }
            }
        }
    });
    if call.faults.on("skip_last_column") {
        for (r, v) in keep.into_iter().enumerate() {
            out[r * n + n - 1] = v;
        }
    }
}

/// Words of a 64-byte chunk of one row.
const WORDS: usize = 16;

/// `w` [n, row_bytes] (n a multiple of 16, rows whole 64-byte chunks) with word l of chunk c of row 16g + r at word ((g * chunks + c) * 16 + l) * 16 + r; `swap01` packs rows 0 and 1 of each group in each other's place.
pub fn pack_words(w: &[u8], n: usize, row_bytes: usize, swap01: bool) -> Vec<u8> {
    assert!(n.is_multiple_of(ROWS) && row_bytes.is_multiple_of(4 * WORDS) && w.len() == n * row_bytes);
    let row = |r: usize| if swap01 && r < 2 { 1 - r } else { r };
    let mut out = vec![0u8; w.len()];
    for (g, group) in out.chunks_exact_mut(ROWS * row_bytes).enumerate() {
        for (at, word) in group.chunks_exact_mut(4).enumerate() {
            let (c, l, r) = (at / (WORDS * ROWS), at / ROWS % WORDS, at % ROWS);
            let from = (ROWS * g + row(r)) * row_bytes + (WORDS * c + l) * 4;
            word.copy_from_slice(&w[from..][..4]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// (prep calls, each `group` call's (row, group) sorted, outputs) of `run_groups` over `rows` x [n] on 2 threads.
    fn visits(rows: usize, n: usize) -> (usize, Vec<(usize, usize)>, Vec<f32>) {
        let launch = CpuLaunch {
            threads: 2,
            split_min: 0,
            ..CpuLaunch::serial()
        };
        let (preps, calls) = (AtomicUsize::new(0), Mutex::new(Vec::new()));
        let mut out = vec![-1f32; rows * n];
        let call = Call {
            work: 1 << 20,
            faults: Faults::NONE,
        };
        let prep = || preps.fetch_add(1, Ordering::Relaxed);
        run_groups(rows, n, &mut out, &launch, call, prep, |_, r, g, dst| {
            calls.lock().unwrap().push((r, g));
            for (c, v) in dst.iter_mut().enumerate() {
                *v = (r * n + g * ROWS + c) as f32;
            }
        });
        let mut calls = calls.into_inner().unwrap();
        calls.sort();
        (preps.into_inner(), calls, out)
    }

    #[test]
    fn one_row_threads_prepare_their_own_activations() {
        let (preps, calls, out) = visits(1, 160);
        assert_eq!(preps, 2, "each thread prepares its own activations");
        assert_eq!(calls, (0..10).map(|g| (0, g)).collect::<Vec<_>>());
        assert!(
            out.iter().enumerate().all(|(i, &v)| v == i as f32),
            "every output where its group's belongs"
        );
    }

    #[test]
    fn longer_calls_prepare_once() {
        let (preps, calls, out) = visits(3, 64);
        assert_eq!(preps, 1);
        assert_eq!(calls.len(), 3 * 4);
        assert!(out.iter().enumerate().all(|(i, &v)| v == i as f32));
    }

    #[test]
    fn a_vector_holds_one_word_of_sixteen_rows() {
        let (n, row_bytes) = (32, 128);
        let w: Vec<u8> = (0..n * row_bytes).map(|i| (i * 7 + i / 251) as u8).collect();
        let p = pack_words(&w, n, row_bytes, false);
        // Group 1, chunk 1, word 3, row 5: row 21's word 16 + 3.
        let at = ((2 + 1) * 16 + 3) * 64 + 5 * 4;
        assert_eq!(p[at..at + 4], w[21 * row_bytes + 19 * 4..][..4]);
        let swapped = pack_words(&w, n, row_bytes, true);
        assert_eq!(swapped[..4], w[row_bytes..][..4], "row 1 in row 0's place");
        assert_eq!(swapped[4..8], w[..4]);
    }
}
