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

/// Where a row's picks land: `col..col + top_k` of an output row of `stride` values, each shifted by the row's offset (-1 padding stays -1).
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    pub stride: usize,
    pub col: usize,
    pub offsets: Option<&'a [i32]>,
}

impl Place<'_> {
    /// Picks alone: `[rows, top_k]`, unshifted.
    pub fn plain(top_k: usize) -> Place<'static> {
        Place {
            stride: top_k,
            col: 0,
            offsets: None,
        }
    }

    /// Checks the placement against `rows` output rows of `out_len` values in all.
    pub fn check(&self, rows: usize, top_k: usize, out_len: usize) -> Result<(), String> {
        if self.col + top_k > self.stride || out_len != rows * self.stride {
            return Err(format!(
                "index_topk: picks at {}..{} of rows of {} do not fit an output of {out_len} values for {rows} rows",
                self.col,
                self.col + top_k,
                self.stride
            ));
        }
        match self.offsets {
            Some(o) if o.len() != rows => Err(format!("index_topk: {} offsets for {rows} rows", o.len())),
            _ => Ok(()),
        }
    }
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
    index_topk_placed(scores, num_visible, top_k, Place::plain(top_k), out, launch, faults)
}

/// `index_topk` writing each row's picks where `place` says, leaving the row's other values as they are.
pub fn index_topk_placed(
    scores: &[f32],
    num_visible: &[i32],
    top_k: usize,
    place: Place<'_>,
    out: &mut [i32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let rows = num_visible.len();
    if rows == 0 || top_k == 0 {
        return;
    }
    assert_eq!(scores.len() % rows, 0, "index_topk: scores are not whole rows");
    place.check(rows, top_k, out.len()).unwrap_or_else(|e| panic!("{e}"));
    let num_cols = scores.len() / rows;
    assert!(num_cols < u32::MAX as usize, "index_topk: too many columns");
    assert!(
        num_visible.iter().all(|&v| v >= 0 && v as usize <= num_cols),
        "index_topk: visible count outside 0..=columns"
    );
    let lower_first = !faults.on("tie_higher_index");
    let pad_short = !faults.on("unpadded_short_rows");
    let by_score = faults.on("score_order");
    let stride = place.stride;
    par_chunks_mut(out, stride, launch.split_threads(rows * top_k), |first, chunk| {
        let mut keys: Vec<u64> = Vec::new();
        for (i, y) in chunk.chunks_mut(stride).enumerate() {
            let row = first + i;
            let y = &mut y[place.col..place.col + top_k];
            let shift = place.offsets.map_or(0, |o| o[row]);
            let visible = num_visible[row] as usize;
            let row_scores = &scores[row * num_cols..row * num_cols + visible];
            if visible <= top_k {
                for (j, o) in y[..visible].iter_mut().enumerate() {
                    *o = j as i32 + shift;
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
            y.iter_mut().for_each(|o| *o += shift);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_picks_land_in_their_columns_shifted_and_the_rest_stays() {
        let scores = [
            0.5,
            3.0,
            1.0,
            2.0,
            9.0,
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
        ];
        let visible = [4, 1];
        let place = Place {
            stride: 5,
            col: 2,
            offsets: Some(&[100, 7]),
        };
        let mut out = vec![-9; 10];
        index_topk_placed(
            &scores,
            &visible,
            2,
            place,
            &mut out,
            &CpuLaunch::serving(1),
            Faults::NONE,
        );
        assert_eq!(out, vec![-9, -9, 101, 103, -9, -9, -9, 7, -1, -9]);
        let bad = Place { stride: 3, ..place };
        assert!(bad.check(2, 2, 6).is_err() && place.check(2, 2, 10).is_ok());
    }
}
