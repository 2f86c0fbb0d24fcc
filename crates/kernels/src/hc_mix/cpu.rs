//! CPU `hc_mix`: rows split over threads; each mix value is one 16-lane dot scaled by the row's inverse RMS.

use crate::cpu::{CpuLaunch, SimdPath, dot, par_chunks_mut};
use crate::faults::Faults;

/// `out[r, m] = (x[r] . hc_fn[m]) * rsqrt(mean(x[r]^2) + eps)`: `x` rows of `hc_dim` values, `hc_fn` [mix_width, hc_dim].
pub fn hc_mix(x: &[f32], hc_fn: &[f32], hc_dim: usize, eps: f32, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    assert!(
        hc_dim > 0 && hc_fn.len().is_multiple_of(hc_dim),
        "hc_mix: hc_fn is not whole rows of {hc_dim}"
    );
    let mix_width = hc_fn.len() / hc_dim;
    assert_eq!(x.len() % hc_dim, 0, "hc_mix: input is not whole rows of {hc_dim}");
    let rows = x.len() / hc_dim;
    assert_eq!(out.len(), rows * mix_width, "hc_mix: output is not [rows, {mix_width}]");
    let tile = launch.tile_rows.min(rows.max(1));
    let skip_last = faults.on("skip_last_row");
    let lost_rsqrt = faults.on("lost_rsqrt");
    let sequential = faults.on("order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, mix_width, launch.split_threads(out.len()), |first_row, chunk| {
        let mut inv_rms = Vec::with_capacity(tile);
        for (tile_idx, tile_out) in chunk.chunks_mut(tile * mix_width).enumerate() {
            let row0 = first_row + tile_idx * tile;
            let tile_x = &x[row0 * hc_dim..(row0 + tile_out.len() / mix_width) * hc_dim];
            inv_rms.clear();
            inv_rms.extend(tile_x.chunks(hc_dim).map(|row| {
                if lost_rsqrt {
                    1.0
                } else {
                    inv_rms_of(row, eps, launch.simd)
                }
            }));
            // Mix rows outer so one `hc_fn` row serves the whole tile from cache.
            for (m, w) in hc_fn.chunks(hc_dim).enumerate() {
                for (i, row) in tile_x.chunks(hc_dim).enumerate() {
                    if skip_last && row0 + i + 1 == rows {
                        continue;
                    }
                    let d = if sequential {
                        row.iter().zip(w).map(|(a, b)| a * b).sum()
                    } else {
                        dot(row, w, launch.simd)
                    };
                    tile_out[i * mix_width + m] = d * inv_rms[i];
                }
            }
        }
    });
}

/// `1 / sqrt(sum(x^2) / len + eps)`, the sum in the 16-lane dot order (the same arithmetic as `rms_norm`).
#[inline]
pub(crate) fn inv_rms_of(row: &[f32], eps: f32, simd: SimdPath) -> f32 {
    1.0 / (dot(row, row, simd) / row.len() as f32 + eps).sqrt()
}
