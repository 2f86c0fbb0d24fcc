//! CPU `rms_norm`: rows split over threads, the sum of squares in the fixed 16-lane order.

use crate::cpu::{CpuLaunch, dot, par_chunks_mut};
use crate::faults::Faults;

/// `out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight` for every row of `weight.len()` values.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    let dim = weight.len();
    assert_eq!(x.len(), out.len(), "rms_norm: input and output lengths differ");
    assert_eq!(x.len() % dim, 0, "rms_norm: input is not whole rows of {dim}");
    let rows = x.len() / dim;
    let tile = launch.tile_rows.min(rows.max(1));
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (tile_idx, tile_out) in chunk.chunks_mut(tile * dim).enumerate() {
            for (i, y) in tile_out.chunks_mut(dim).enumerate() {
                let r = first_row + tile_idx * tile + i;
                if faults.on("skip_last_row") && r + 1 == rows {
                    continue;
                }
                let row = &x[r * dim..(r + 1) * dim];
                let used = if faults.on("drop_last_element") {
                    &row[..dim - 1]
                } else {
                    row
                };
                let sum = if faults.on("order_by_tile") && launch.tile_rows == 1 {
                    used.iter().map(|v| v * v).sum()
                } else {
                    dot(used, used, launch.simd)
                };
                let scale = 1.0 / (sum / dim as f32 + eps).sqrt();
                for ((o, &v), &g) in y.iter_mut().zip(row).zip(weight) {
                    *o = v * scale * g;
                }
            }
        }
    });
}
