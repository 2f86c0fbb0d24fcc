//! CPU `index_topk`: rows split over threads; an exact selection on (score, lower index first) keys, then an ascending sort.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// A key whose unsigned order is the score order, ties going to the lower index (scores NaN-free; -0.0 equals +0.0).
#[inline]
pub(crate) fn rank_key(score: f32, idx: usize, lower_first: bool) -> u64 {
    let bits = if score == 0.0 { 0 } else { score.to_bits() };
    let ordered = if bits >> 31 == 1 { !bits } else { bits | 0x8000_0000 };
    let tie = if lower_first { u32::MAX - idx as u32 } else { idx as u32 };
    ((ordered as u64) << 32) | tie as u64
}

/// Per row the indices of the `top_k` largest of its first `num_visible[r]` scores (ties: lower index), ascending, padded with -1.
pub fn index_topk(
    scores: &[f32],
    num_visible: &[i32],
    top_k: usize,
    out: &mut [i32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let rows = num_visible.len();
    if rows == 0 || top_k == 0 {
        return;
    }
    assert_eq!(scores.len() % rows, 0, "index_topk: scores are not whole rows");
    assert_eq!(out.len(), rows * top_k, "index_topk: output is not [rows, top_k]");
    let num_cols = scores.len() / rows;
    assert!(num_cols < u32::MAX as usize, "index_topk: too many columns");
    assert!(
        num_visible.iter().all(|&v| v >= 0 && v as usize <= num_cols),
        "index_topk: visible count outside 0..=columns"
    );
    let lower_first = !faults.on("tie_higher_index");
    let pad_short = !faults.on("unpadded_short_rows");
    let by_score = faults.on("score_order");
    par_chunks_mut(out, top_k, launch.split_threads(out.len()), |first, chunk| {
        let mut keys: Vec<u64> = Vec::new();
        for (i, y) in chunk.chunks_mut(top_k).enumerate() {
            let row = first + i;
            let visible = num_visible[row] as usize;
            let row_scores = &scores[row * num_cols..row * num_cols + visible];
            if visible <= top_k {
                for (j, o) in y[..visible].iter_mut().enumerate() {
                    *o = j as i32;
                }
                if pad_short {
                    y[visible..].fill(-1);
                }
                continue;
            }
            keys.clear();
            keys.extend(row_scores.iter().enumerate().map(|(j, &s)| rank_key(s, j, lower_first)));
            // Keys are distinct (each holds its index), so the selected set does not depend on the algorithm.
            keys.select_nth_unstable_by(top_k - 1, |a, b| b.cmp(a));
            let chosen = &mut keys[..top_k];
            if by_score {
                chosen.sort_unstable_by(|a, b| b.cmp(a));
            }
            for (o, &k) in y.iter_mut().zip(chosen.iter()) {
                let low = k as u32;
                *o = (if lower_first { u32::MAX - low } else { low }) as i32;
            }
            if !by_score {
                y.sort_unstable();
            }
        }
    });
}
