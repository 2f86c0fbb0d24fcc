//! CPU `dequant_gemm`: weights decoded exactly to f32 against unquantised f32 activations (transformers' semantics).

use tensorfold_formats::{e2m1, e4m3, e8m0};

use crate::cpu::{CpuLaunch, SimdPath, dot, dot4};
use crate::faults::Faults;
use crate::gemm::par_columns;

/// How the weight is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// FP8 e4m3 codes `[n, k]` with e8m0 scales per 128x128 block.
    Fp8Block,
    /// MXFP4: e2m1 pairs `[n, k/2]` (element 2j low nibble) with e8m0 scales per 32 along k.
    Mxfp4,
}

/// Weight row `n` decoded into `row` (`k` values): each code's value times its block's scale.
#[allow(clippy::too_many_arguments)]
fn decode_row(
    format: WeightFormat,
    w: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    lost_scale: bool,
    simd: SimdPath,
    row: &mut [f32],
) {
    match format {
        WeightFormat::Fp8Block => {
            let grid_cols = k.div_ceil(128);
            let codes = &w[n * k..(n + 1) * k];
            for (b, (vals, codes)) in row.chunks_mut(128).zip(codes.chunks(128)).enumerate() {
                let s = if lost_scale && b == grid_cols - 1 {
                    1.0
                } else {
                    e8m0::TABLE[scales[n / 128 * grid_cols + b] as usize]
                };
                #[cfg(target_arch = "x86_64")]
                if simd != SimdPath::Portable {
                    // SAFETY: every path but the portable one has AVX2 and FMA.
                    unsafe { super::x86::decode_fp8(codes, s, vals) };
                    continue;
                }
                let _ = simd;
                for (v, &c) in vals.iter_mut().zip(codes) {
                    *v = e4m3::TABLE[c as usize] * s;
                }
            }
        }
        WeightFormat::Mxfp4 => {
            let blocks = k / 32;
            let bytes = &w[n * k / 2..(n + 1) * k / 2];
            for (b, (vals, bytes)) in row.chunks_mut(32).zip(bytes.chunks(16)).enumerate() {
                let s = if lost_scale && b == blocks - 1 {
                    1.0
                } else {
                    e8m0::TABLE[scales[n * blocks + b] as usize]
                };
                for (pair, &byte) in vals.chunks_mut(2).zip(bytes) {
                    pair[0] = e2m1::TABLE[(byte & 0xF) as usize] * s;
                    pair[1] = e2m1::TABLE[(byte >> 4) as usize] * s;
                }
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
    // Threads split the output columns, so each weight row is decoded once for every activation row.
    let threads = launch.split_threads(out.len() * k / 16);
    par_columns(out, rows, n, threads, 1, |cols, view| {
        let mut wr = vec![0f32; 4 * k];
        let width = cols.len();
        let mut col = cols.start;
        while col < cols.end {
            // Up to four columns of one group decoded together; each output is still one `dot`.
            let g = col / per_group;
            let four = (cols.end.min((g + 1) * per_group) - col).min(4);
            for (j, row) in wr.chunks_mut(k).take(four).enumerate() {
                decode_row(format, w, scales, col + j, k, lost_scale, launch.simd, row);
            }
            for r in 0..rows {
                if skip_last && r + 1 == rows {
                    continue;
                }
                let xg = &x[(r * groups + g) * k..(r * groups + g + 1) * k];
                let y = &mut view[r * width + col - cols.start..][..four];
                if sequential {
                    for (v, wj) in y.iter_mut().zip(wr.chunks(k)) {
                        *v = xg.iter().zip(wj).map(|(a, b)| a * b).sum();
                    }
                } else if four == 4 {
                    y.copy_from_slice(&dot4(xg, std::array::from_fn(|j| &wr[j * k..(j + 1) * k]), launch.simd));
                } else {
                    for (v, wj) in y.iter_mut().zip(wr.chunks(k)) {
                        *v = dot(xg, wj, launch.simd);
                    }
                }
            }
            col += four;
        }
    });
}
