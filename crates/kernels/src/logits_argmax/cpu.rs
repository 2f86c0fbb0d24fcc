//! CPU `logits_argmax`: rows split over threads, each scanned in id order.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// The greedy pick of one row of logits: the lowest id of the largest non-NaN logit, the last id when every logit is NaN.
pub fn pick(row: &[f32]) -> u32 {
    pick_with(row, Faults::NONE)
}

/// `pick` with the contract's planted faults.
fn pick_with(row: &[f32], faults: Faults) -> u32 {
    let (ties_last, nan_wins) = (faults.on("ties_to_last"), faults.on("nan_wins"));
    let mut best = 0usize;
    for (i, &l) in row.iter().enumerate() {
        let b = row[best];
        let better = l > b || b.is_nan() || (ties_last && l == b) || (nan_wins && l.is_nan());
        if better {
            best = i;
        }
    }
    best as u32
}

/// Each `vocab`-wide row's pick of `logits` into `out` (one id a row, as an f32: exact below 2^24).
pub fn logits_argmax(logits: &[f32], vocab: usize, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    assert!(
        vocab > 0 && vocab < 1 << 24,
        "logits_argmax: vocab {vocab} must be 1 to 2^24 - 1"
    );
    assert_eq!(
        logits.len(),
        out.len() * vocab,
        "logits_argmax: {} logits are not {} rows of {vocab}",
        logits.len(),
        out.len()
    );
    par_chunks_mut(out, 1, launch.split_threads(logits.len()), |first, chunk| {
        for (i, o) in chunk.iter_mut().enumerate() {
            let r = first + i;
            *o = pick_with(&logits[r * vocab..(r + 1) * vocab], faults) as f32;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn picks_the_lowest_id_of_the_largest_number_and_the_last_id_when_all_are_nan() {
        let nan = f32::NAN;
        assert_eq!(pick(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(pick(&[nan, 1.0, nan, 3.0, 3.0]), 3);
        assert_eq!(pick(&[2.0, nan, 1.0]), 0);
        assert_eq!(pick(&[nan, nan, nan]), 2);
        assert_eq!(pick(&[-0.0, 0.0, -1.0]), 0);
        assert_eq!(pick(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(pick(&[7.0]), 0);
    }
}
