//! CPU `bf16_gemm`: `y = x . W^T` with bf16 weights and f32 activations; threads split the columns.

use std::ops::Range;

use tensorfold_formats::bf16;

use crate::cpu::{CpuLaunch, LANES, SimdPath, reduce_lanes};
use crate::faults::Faults;
use crate::gemm::{PAIRS, par_columns};

/// Weight values per 64-byte chunk: lane l holds elements 2l and 2l + 1.
pub(crate) const CHUNK: usize = 32;
/// Most rows in one pass over a group of weight rows.
const ROW_CAP: usize = 16;

/// `out[r, n]`: 16 FMA lanes, lane l taking elements 32c + 2l then 32c + 2l + 1 for c ascending, then the 4-level tree.
#[allow(clippy::too_many_arguments)]
pub fn bf16_gemm(x: &[f32], w: &[u16], n: usize, k: usize, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    assert!(n > 0 && k > 0, "bf16_gemm: empty weight [{n}, {k}]");
    assert_eq!(w.len(), n * k, "bf16_gemm: weight is not [{n}, {k}]");
    assert_eq!(x.len() % k, 0, "bf16_gemm: activations are not whole rows of {k}");
    let rows = x.len() / k;
    assert_eq!(out.len(), rows * n, "bf16_gemm: output is not [{rows}, {n}]");
    crate::gemm::assert_launch(launch);
    // Planted: the K tail beyond whole chunks dropped.
    let k_used = if faults.on("drop_tail") { k / CHUNK * CHUNK } else { k };
    let xs = split_pairs(x, k, k_used);
    par_columns(
        out,
        rows,
        n,
        launch.split_threads(rows * n * k / 16),
        PAIRS,
        |cols, view| columns(&xs, w, k, rows, cols, view, launch, faults),
    );
}

/// Activation rows padded to whole chunks, each chunk's even-indexed values then its odd-indexed ones.
fn split_pairs(x: &[f32], k: usize, k_used: usize) -> Vec<f32> {
    let stride = k.div_ceil(CHUNK) * CHUNK;
    let mut xs = vec![0f32; x.len() / k * stride];
    for (src, dst) in x.chunks_exact(k).zip(xs.chunks_exact_mut(stride)) {
        for (e, &v) in src[..k_used].iter().enumerate() {
            dst[e - e % CHUNK + e % 2 * 16 + e % CHUNK / 2] = v;
        }
    }
    xs
}

#[allow(clippy::too_many_arguments)]
fn columns(
    xs: &[f32],
    w: &[u16],
    k: usize,
    rows: usize,
    cols: Range<usize>,
    view: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let stride = k.div_ceil(CHUNK) * CHUNK;
    let width = cols.len();
    let cap = launch.tile_rows.clamp(1, ROW_CAP);
    let skip_last_row = faults.on("skip_last_row");
    let by_tile = faults.on("order_by_tile") && launch.tile_rows == 1;
    for t0 in (0..rows).step_by(cap) {
        let t1 = (t0 + cap).min(rows);
        for g0 in cols.clone().step_by(PAIRS) {
            let g1 = (g0 + PAIRS).min(cols.end);
            let mut r = t0;
            while r < t1 {
                let mr = if t1 - r >= 4 { 4 } else { 1 };
                let x_rows: [&[f32]; 4] = std::array::from_fn(|i| &xs[(r + i.min(mr - 1)) * stride..][..stride]);
                let w_rows: [&[u16]; PAIRS] = std::array::from_fn(|j| &w[(g0 + j).min(g1 - 1) * k..][..k]);
                let acc = tile(launch.simd_for(rows), &x_rows[..mr], &w_rows[..g1 - g0], k, by_tile);
                for ri in 0..mr {
                    if skip_last_row && r + ri + 1 == rows {
                        continue;
                    }
                    let dst = &mut view[(r + ri) * width + g0 - cols.start..][..g1 - g0];
                    dst.copy_from_slice(&acc[ri * PAIRS..][..g1 - g0]);
                }
                r += mr;
            }
        }
    }
}

/// Results for rows `x` (1 or 4) against up to 16 weight rows: `out[ri * 16 + ci]`.
fn tile(simd: SimdPath, x: &[&[f32]], w: &[&[u16]], k: usize, sequential: bool) -> [f32; 4 * PAIRS] {
    let mut out = [0f32; 4 * PAIRS];
    #[cfg(target_arch = "x86_64")]
    if !sequential {
        // SAFETY: the path was checked available; rows hold k values, activations whole chunks.
        unsafe {
            match simd {
                SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
                    super::x86::tile_avx512(x, w, k, &mut out);
                    return out;
                }
                SimdPath::Avx2 => {
                    super::x86::tile_avx2(x, w, k, &mut out);
                    return out;
                }
                SimdPath::Portable => {}
            }
        }
    }
    for (ri, xr) in x.iter().enumerate() {
        for (ci, wr) in w.iter().enumerate() {
            out[ri * PAIRS + ci] = if sequential {
                (0..k).fold(0f32, |s, e| {
                    xr[e - e % CHUNK + e % 2 * 16 + e % CHUNK / 2].mul_add(bf16::bf16_to_f32(wr[e]), s)
                })
            } else {
                let mut lanes = [0f32; LANES];
                for (e, &b) in wr.iter().enumerate() {
                    let (c, j) = (e / CHUNK, e % CHUNK);
                    let l = j / 2;
                    lanes[l] = xr[c * CHUNK + j % 2 * 16 + l].mul_add(bf16::bf16_to_f32(b), lanes[l]);
                }
                reduce_lanes(lanes)
            };
        }
    }
    out
}
