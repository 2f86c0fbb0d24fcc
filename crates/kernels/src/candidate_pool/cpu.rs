//! CPU `candidate_pool`: rows split over threads; block maxima, the newest block forced in, an exact selection on (max, lower block first).

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;
use crate::index_topk::cpu::rank_key;

/// Per row the `top_blocks` blocks of `block_size` positions (of its first `num_visible[r]` scores) with the highest maximum, the block of the newest position always among them (ties: lower block), ascending, padded with -1.
pub fn candidate_pool(
    scores: &[f32],
    num_visible: &[i32],
    block_size: usize,
    top_blocks: usize,
    out: &mut [i32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let rows = num_visible.len();
    if rows == 0 || top_blocks == 0 {
        return;
    }
    assert!(block_size > 0, "candidate_pool: block_size is 0");
    assert_eq!(scores.len() % rows, 0, "candidate_pool: scores are not whole rows");
    assert_eq!(
        out.len(),
        rows * top_blocks,
        "candidate_pool: output is not [rows, top_blocks]"
    );
    let num_cols = scores.len() / rows;
    assert!(
        num_visible.iter().all(|&v| v >= 0 && v as usize <= num_cols),
        "candidate_pool: visible count outside 0..=columns"
    );
    let force_newest = !faults.on("newest_not_forced");
    let lower_first = !faults.on("tie_higher_block");
    let by_sum = faults.on("block_sum");
    par_chunks_mut(out, top_blocks, launch.split_threads(out.len()), |first, chunk| {
        let mut keys: Vec<u64> = Vec::new();
        for (i, y) in chunk.chunks_mut(top_blocks).enumerate() {
            let row = first + i;
            let visible = num_visible[row] as usize;
            let num_blocks = visible.div_ceil(block_size);
            y.fill(-1);
            if num_blocks <= top_blocks {
                for (b, o) in y[..num_blocks].iter_mut().enumerate() {
                    *o = b as i32;
                }
                continue;
            }
            let row_scores = &scores[row * num_cols..row * num_cols + visible];
            keys.clear();
            keys.extend(row_scores.chunks(block_size).enumerate().map(|(b, block)| {
                let max = if by_sum {
                    block.iter().sum()
                } else {
                    block.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s))
                };
                rank_key(max, b, lower_first)
            }));
            if force_newest {
                let newest = num_blocks - 1;
                keys[newest] = (u64::MAX << 32) | (rank_key(0.0, newest, lower_first) & 0xFFFF_FFFF);
            }
            keys.select_nth_unstable_by(top_blocks - 1, |a, b| b.cmp(a));
            for (o, &k) in y.iter_mut().zip(keys[..top_blocks].iter()) {
                let low = k as u32;
                *o = (if lower_first { u32::MAX - low } else { low }) as i32;
            }
            y.sort_unstable();
        }
    });
}
