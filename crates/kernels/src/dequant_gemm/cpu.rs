//! CPU `dequant_gemm`: weights decoded exactly to f32 against unquantised f32 activations (transformers' semantics).

use tensorfold_formats::{e2m1, e4m3, e8m0};

use crate::cpu::{CpuLaunch, dot, par_chunks_mut};
use crate::faults::Faults;

/// How the weight is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// FP8 e4m3 codes `[n, k]` with e8m0 scales per 128x128 block.
    Fp8Block,
    /// MXFP4: e2m1 pairs `[n, k/2]` (element 2j low nibble) with e8m0 scales per 32 along k.
    Mxfp4,
}

/// Weight row `n` decoded into `row` (`k` values).
fn decode_row(format: WeightFormat, w: &[u8], scales: &[u8], n: usize, k: usize, lost_scale: bool, row: &mut [f32]) {
    match format {
        WeightFormat::Fp8Block => {
            let grid_cols = k.div_ceil(128);
            for (j, v) in row.iter_mut().enumerate() {
                let s = if lost_scale && j / 128 == grid_cols - 1 {
                    1.0
                } else {
                    e8m0::decode(scales[n / 128 * grid_cols + j / 128])
                };
                *v = e4m3::decode(w[n * k + j]) * s;
            }
        }
        WeightFormat::Mxfp4 => {
            for (j, v) in row.iter_mut().enumerate() {
                let byte = w[(n * k + j) / 2];
                let code = if j.is_multiple_of(2) { byte & 0xF } else { byte >> 4 };
                let s = if lost_scale && j / 32 == k / 32 - 1 {
                    1.0
                } else {
                    e8m0::decode(scales[n * (k / 32) + j / 32])
                };
                *v = e2m1::decode(code) * s;
            }
        }
    }
}

/// `out[r, g*n_g + i] = dot(x[r, group g], W[g*n_g + i])` with W decoded exactly; `groups` = 1 for a plain GEMM.
#[allow(clippy::too_many_arguments)]
pub fn dequant_gemm(
    x: &[f32],
    w: &[u8],
    scales: &[u8],
    format: WeightFormat,
    n: usize,
    k: usize,
    groups: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(
        n > 0 && k > 0 && groups > 0 && n.is_multiple_of(groups),
        "dequant_gemm: [{n}, {k}] in {groups} groups"
    );
    assert!(
        format == WeightFormat::Fp8Block || k.is_multiple_of(32),
        "dequant_gemm: MXFP4 k must be a multiple of 32"
    );
    let rows = x.len() / (k * groups);
    assert_eq!(
        x.len(),
        rows * k * groups,
        "dequant_gemm: activations are not whole rows of {groups} x {k}"
    );
    assert_eq!(out.len(), rows * n, "dequant_gemm: output is not [{rows}, {n}]");
    let per_group = n / groups;
    let lost_scale = faults.on("lost_scale");
    let skip_last = faults.on("skip_last_row");
    let sequential = faults.on("order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, n, launch.split_threads(out.len() * k / 16), |first, chunk| {
        let mut wr = vec![0f32; k];
        for col in 0..n {
            decode_row(format, w, scales, col, k, lost_scale, &mut wr);
            let g = col / per_group;
            for (i, y) in chunk.chunks_mut(n).enumerate() {
                let r = first + i;
                if skip_last && r + 1 == rows {
                    continue;
                }
                let xg = &x[(r * groups + g) * k..(r * groups + g + 1) * k];
                y[col] = if sequential {
                    xg.iter().zip(&wr).map(|(a, b)| a * b).sum()
                } else {
                    dot(xg, &wr, launch.simd)
                };
            }
        }
    });
}
