//! 16-row groups: a weight laid out so one 64-byte vector holds the same 32-bit word of 16 rows, and a row's sums stay in one lane.

use crate::cpu::CpuLaunch;
use crate::faults::Faults;

/// Rows a group holds side by side.
pub const ROWS: usize = 16;

/// Bytes ahead that each vector load of a packed kernel asks L1 for, and (second) L2.
pub const AHEAD: (usize, usize) = (2048, 32768);

/// Activation rows whose outputs one sweep over a group's weights computes, unless the launch's tiles are smaller.
const SWEEP_ROWS: usize = 64;

/// Groups a one-row call's thread visits side by side at most (`Sweep::ways`).
const MAX_WAYS: usize = 4;

/// How `run_groups` visits a packed weight, and the controls planted in the call.
pub struct Sweep {
    /// Launch-wide work units, as `split_threads` counts them.
    pub work: usize,
    /// The call's planted controls.
    pub faults: Faults,
    /// Groups a one-row call's thread reads side by side (its range cut into `ways` runs of q groups, group i of each in turn): that many streams from memory.
    pub ways: usize,
}

/// `out[r, n]` of a packed weight's GEMM: threads split whole groups and `group(prep, r, gs, dst)` writes row r's outputs of groups `gs` (16 each); a one-row call's threads each run `prep` (activations made in their own cache while the other thread starts), a longer call's caller runs it once; the control `skip_last_column` keeps each row's last output.
pub fn run_groups<S: Sync>(
    rows: usize,
    n: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    sweep: Sweep,
    prep: impl Fn() -> S + Sync,
    group: impl Fn(&S, usize, &[usize], &mut [f32]) + Sync,
) {
    assert!(n.is_multiple_of(ROWS) && out.len() == rows * n && (1..=MAX_WAYS).contains(&sweep.ways));
    let keep: Vec<f32> = (0..rows).map(|r| out[r * n + n - 1]).collect();
    let threads = launch.split_threads(sweep.work);
    if rows == 1 {
        super::par_columns(out, 1, n, threads, ROWS, |cols, view| {
            let prepared = prep();
            let (first, m) = (cols.start / ROWS, cols.len() / ROWS);
            let q = m.div_ceil(sweep.ways);
            let mut buf = [0f32; MAX_WAYS * ROWS];
            for i in 0..q {
                let mut gs = [0usize; MAX_WAYS];
                let mut count = 0;
                for g in (i..m).step_by(q).take(sweep.ways) {
                    gs[count] = first + g;
                    count += 1;
                }
                group(&prepared, 0, &gs[..count], &mut buf[..count * ROWS]);
                for (g, part) in gs[..count].iter().zip(buf.chunks_exact(ROWS)) {
                    view[(g - first) * ROWS..][..ROWS].copy_from_slice(part);
                }
            }
        });
    } else {
        let prepared = prep();
        let tile = launch.tile_rows.clamp(1, SWEEP_ROWS);
        super::par_columns(out, rows, n, threads, ROWS, |cols, view| {
            let width = cols.len();
            for t0 in (0..rows).step_by(tile) {
                for g in cols.clone().step_by(ROWS) {
                    for r in t0..(t0 + tile).min(rows) {
                        group(
                            &prepared,
                            r,
                            &[g / ROWS],
                            &mut view[r * width + g - cols.start..][..ROWS],
                        );
                    }
                }
            }
        });
    }
    if sweep.faults.on("skip_last_column") {
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

    /// Each `group` call's row and groups, sorted.
    type Calls = Vec<(usize, Vec<usize>)>;

    /// (prep calls, `group` calls, outputs) of `run_groups` over `rows` x [n] with `ways`, on 2 threads.
    fn visits(rows: usize, n: usize, ways: usize) -> (usize, Calls, Vec<f32>) {
        let launch = CpuLaunch {
            threads: 2,
            split_min: 0,
            ..CpuLaunch::serial()
        };
        let (preps, calls) = (AtomicUsize::new(0), Mutex::new(Vec::new()));
        let mut out = vec![-1f32; rows * n];
        let sweep = Sweep {
            work: 1 << 20,
            faults: Faults::NONE,
            ways,
        };
        let prep = || preps.fetch_add(1, Ordering::Relaxed);
        run_groups(rows, n, &mut out, &launch, sweep, prep, |_, r, gs, dst| {
            calls.lock().unwrap().push((r, gs.to_vec()));
            for (g, part) in gs.iter().zip(dst.chunks_exact_mut(ROWS)) {
                for (c, v) in part.iter_mut().enumerate() {
                    *v = (r * n + g * ROWS + c) as f32;
                }
            }
        });
        let mut calls = calls.into_inner().unwrap();
        calls.sort();
        (preps.into_inner(), calls, out)
    }

    #[test]
    fn one_row_threads_prepare_their_own_and_read_groups_side_by_side() {
        // Five groups a thread (n = 160 on 2 threads): q = 3, so (0, 3), (1, 4) and (2) alone.
        let (preps, calls, out) = visits(1, 160, 2);
        assert_eq!(preps, 2, "each thread prepares its own activations");
        let want: Calls = [vec![0, 3], vec![1, 4], vec![2], vec![5, 8], vec![6, 9], vec![7]]
            .into_iter()
            .map(|gs| (0, gs))
            .collect();
        assert_eq!(calls, want);
        assert!(
            out.iter().enumerate().all(|(i, &v)| v == i as f32),
            "every output where its group's belongs"
        );
        let (_, single, _) = visits(1, 160, 1);
        assert!(single.iter().all(|(_, gs)| gs.len() == 1) && single.len() == 10);
    }

    #[test]
    fn longer_calls_prepare_once_and_read_one_group_at_a_time() {
        let (preps, calls, out) = visits(3, 64, 2);
        assert_eq!(preps, 1);
        assert_eq!(calls.len(), 3 * 4);
        assert!(calls.iter().all(|(_, gs)| gs.len() == 1));
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
