//! CPU `index_scores`: (row, key column) items split over threads; heads summed in order, each dot in the fixed 16 lanes.

use crate::cpu::{CpuLaunch, dot, par_chunks_mut};
use crate::faults::Faults;

/// The indexer's query heads and their width (V4-Flash: 64 x 128).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexShape {
    pub num_heads: usize,
    pub head_dim: usize,
    /// Each head weight is multiplied by this (rounded to f32) before it weighs its dot.
    pub weight_scale: f32,
}

/// `out[r, j] = sum_h (w[r, h] * weight_scale) * relu(q[r, h] . keys[start_r + j])` for `j < visible_r`, else -inf; `key_range[r] = [start_r, visible_r]`.
#[allow(clippy::too_many_arguments)]
pub fn index_scores(
    q: &[f32],
    w: &[f32],
    key_range: &[i32],
    keys: &[f32],
    shape: IndexShape,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let (heads, hd) = (shape.num_heads, shape.head_dim);
    assert_eq!(key_range.len() % 2, 0, "index_scores: key_range is not [rows, 2]");
    let rows = key_range.len() / 2;
    if rows == 0 {
        return;
    }
    assert_eq!(
        q.len(),
        rows * heads * hd,
        "index_scores: q is not [rows, heads, head_dim]"
    );
    assert_eq!(w.len(), rows * heads, "index_scores: w is not [rows, heads]");
    assert_eq!(keys.len() % hd, 0, "index_scores: keys are not whole rows of {hd}");
    assert_eq!(out.len() % rows, 0, "index_scores: output is not whole rows");
    let num_cols = out.len() / rows;
    let num_keys = keys.len() / hd;
    for r in key_range.chunks(2) {
        let (start, visible) = (r[0], r[1]);
        assert!(start >= 0 && visible >= 0, "index_scores: negative key range");
        assert!(
            visible as usize <= num_cols,
            "index_scores: more visible keys than output columns"
        );
        assert!(
            (start + visible) as usize <= num_keys,
            "index_scores: key range past the table"
        );
    }
    let relu = !faults.on("no_relu");
    let extra = faults.on("visible_off_by_one") as usize;
    let reverse_heads = faults.on("head_order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, 1, launch.split_threads(out.len()), |first, chunk| {
        for (i, y) in chunk.iter_mut().enumerate() {
            let (row, col) = ((first + i) / num_cols, (first + i) % num_cols);
            let (start, visible) = (key_range[2 * row] as usize, key_range[2 * row + 1] as usize);
            if col >= visible + extra {
                *y = f32::NEG_INFINITY;
                continue;
            }
            let key = &keys[(start + col) * hd..(start + col + 1) * hd];
            let mut acc = 0f32;
            for k in 0..heads {
                let h = if reverse_heads { heads - 1 - k } else { k };
                let s = dot(&q[(row * heads + h) * hd..(row * heads + h + 1) * hd], key, launch.simd);
                // An explicit compare, so -0.0 and NaN both give +0.0 on every path.
                let s = if !relu || s > 0.0 { s } else { 0.0 };
                acc = (w[row * heads + h] * shape.weight_scale).mul_add(s, acc);
            }
            *y = acc;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn extra_columns_are_minus_infinity_and_change_nothing() {
        let shape = IndexShape {
            num_heads: 3,
            head_dim: 19,
            weight_scale: 1.0,
        };
        let mut rng = Rng::new(9, 0);
        let q: Vec<f32> = (0..3 * 19).map(|_| rng.normal()).collect();
        let w: Vec<f32> = (0..3).map(|_| rng.normal()).collect();
        let keys: Vec<f32> = (0..8 * 19).map(|_| rng.normal()).collect();
        let (mut narrow, mut wide) = (vec![0f32; 5], vec![0f32; 9]);
        let launch = CpuLaunch::serial();
        index_scores(&q, &w, &[2, 5], &keys, shape, &mut narrow, &launch, Faults::NONE);
        index_scores(&q, &w, &[2, 5], &keys, shape, &mut wide, &launch, Faults::NONE);
        assert_eq!(
            narrow.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            wide[..5].iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        assert!(wide[5..].iter().all(|&v| v == f32::NEG_INFINITY));
    }
}
