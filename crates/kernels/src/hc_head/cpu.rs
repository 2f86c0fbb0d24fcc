//! CPU `hc_head`: rows split over threads; hc_mix's arithmetic for the gates, then hc_pre's FMA chain over the streams.

use crate::cpu::math::sigmoid;
use crate::cpu::{CpuLaunch, dot, par_chunks_mut};
use crate::faults::Faults;
use crate::hc_mix::cpu::inv_rms_of;
use crate::hc_pre::cpu::{MAX_TERMS, fma_terms};

/// `out[r] = sum_i pre_i * x[r, i]`, `pre = sigmoid((x[r] . hc_fn^T) * rsqrt(mean(x[r]^2) + norm_eps) * scale + base) + hc_eps`.
#[allow(clippy::too_many_arguments)]
pub fn hc_head(
    x: &[f32],
    hc_fn: &[f32],
    base: &[f32],
    scale: f32,
    hc: usize,
    dim: usize,
    norm_eps: f32,
    hc_eps: f32,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!((1..MAX_TERMS).contains(&hc), "hc_head: hc {hc} outside 1..{MAX_TERMS}");
    let hc_dim = hc * dim;
    assert_eq!(
        (hc_fn.len(), base.len()),
        (hc * hc_dim, hc),
        "hc_head: hc_fn must be [{hc}, {hc_dim}], base [{hc}]"
    );
    assert!(
        dim > 0 && x.len().is_multiple_of(hc_dim),
        "hc_head: x is not whole rows of {hc_dim}"
    );
    let rows = x.len() / hc_dim;
    assert_eq!(out.len(), rows * dim, "hc_head: out must be [rows, {dim}]");
    let skip_last = faults.on("skip_last_row");
    let lost_rsqrt = faults.on("lost_rsqrt");
    let sequential = faults.on("order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (i, y) in chunk.chunks_mut(dim).enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == rows {
                continue;
            }
            let row = &x[r * hc_dim..(r + 1) * hc_dim];
            let inv_rms = if lost_rsqrt {
                1.0
            } else {
                inv_rms_of(row, norm_eps, launch.simd)
            };
            let mut terms: [(f32, &[f32]); MAX_TERMS] = [(0.0, &[]); MAX_TERMS];
            for (m, (term, w)) in terms[..hc].iter_mut().zip(hc_fn.chunks(hc_dim)).enumerate() {
                let d = if sequential {
                    row.iter().zip(w).map(|(a, b)| a * b).sum()
                } else {
                    dot(row, w, launch.simd)
                };
                let pre = sigmoid((d * inv_rms).mul_add(scale, base[m])) + hc_eps;
                *term = (pre, &row[m * dim..(m + 1) * dim]);
            }
            fma_terms(&terms[..hc], y, launch.simd);
        }
    });
}
