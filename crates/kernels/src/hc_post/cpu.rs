//! CPU `hc_post`: rows split over threads; each output stream an FMA chain, residual streams first, block output last.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;
use crate::hc_pre::cpu::{MAX_TERMS, fma_terms};

/// `out[r, j] = sum_i comb[r, i, j] * x[r, i] + post[r, j] * f[r]`: f rows [dim], x and out rows [hc, dim], comb rows [hc, hc].
#[allow(clippy::too_many_arguments)]
pub fn hc_post(
    f: &[f32],
    x: &[f32],
    post: &[f32],
    comb: &[f32],
    hc: usize,
    dim: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!((1..MAX_TERMS).contains(&hc), "hc_post: hc {hc} outside 1..{MAX_TERMS}");
    assert_eq!(post.len() % hc, 0, "hc_post: post is not whole rows of {hc}");
    let rows = post.len() / hc;
    assert_eq!(
        (f.len(), x.len(), comb.len(), out.len()),
        (rows * dim, rows * hc * dim, rows * hc * hc, rows * hc * dim),
        "hc_post: f must be [rows, {dim}], x and out [rows, {hc}, {dim}], comb [rows, {hc}, {hc}]"
    );
    let skip_last = faults.on("skip_last_row");
    let untransposed = faults.on("comb_not_transposed");
    let post_first = faults.on("order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, hc * dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (i, y) in chunk.chunks_mut((hc * dim).max(1)).enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == rows {
                continue;
            }
            let c = &comb[r * hc * hc..(r + 1) * hc * hc];
            let stream = |s: usize| &x[(r * hc + s) * dim..(r * hc + s + 1) * dim];
            let block_out = &f[r * dim..(r + 1) * dim];
            for (j, y_j) in y.chunks_mut(dim.max(1)).enumerate() {
                let mut terms: [(f32, &[f32]); MAX_TERMS] = [(0.0, &[]); MAX_TERMS];
                for (s, term) in terms[..hc].iter_mut().enumerate() {
                    let w = if untransposed { c[j * hc + s] } else { c[s * hc + j] };
                    *term = (w, stream(s));
                }
                terms[hc] = (post[r * hc + j], block_out);
                if post_first {
                    terms[..=hc].rotate_right(1);
                }
                fma_terms(&terms[..=hc], y_j, launch.simd);
            }
        }
    });
}
