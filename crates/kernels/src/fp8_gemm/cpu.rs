//! CPU `fp8_gemm`: block inner = 16 FMA lanes (lane l: elements 4l..4l+3, then 64+4l..64+4l+3), tree (j,j+8),(j,j+4),(j,j+2),(0,1).

use std::ops::Range;

use tensorfold_formats::{bf16, e8m0};

use crate::cpu::{CpuLaunch, LANES, SimdPath, reduce_lanes};
use crate::faults::Faults;
use crate::gemm::act::{Fp8Rows, Layout};
use crate::gemm::{BlockWeights, GROUP, PAIRS, Problem, row_panel, run_pairs};

/// Weight rows and columns per scale, and activation values per scale.
pub const BLOCK: usize = 128;

/// Activations are stored times 2^119 and weights decode to value * 2^-120 (see `decode_e4m3`); block scales carry the 2.
pub(crate) const LAYOUT: Layout = Layout {
    per_lane: 4,
    value_factor: f32::from_bits((119 + 127) << 23),
    scale_factor: 2.0,
};

/// `out[r, n]`: over K blocks ascending `acc = fma(inner, sa[r, kb] * sw[n / 128, kb], acc)`, inner the block's 16-lane dot.
#[allow(clippy::too_many_arguments)]
pub fn fp8_gemm(
    x: &[f32],
    w: &[u8],
    w_scale: &[u8],
    n: usize,
    k: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(n > 0 && k > 0, "fp8_gemm: empty weight [{n}, {k}]");
    assert_eq!(w.len(), n * k, "fp8_gemm: weight is not [{n}, {k}]");
    assert_eq!(
        w_scale.len(),
        n.div_ceil(BLOCK) * k.div_ceil(BLOCK),
        "fp8_gemm: scale grid"
    );
    assert_eq!(x.len() % k, 0, "fp8_gemm: activations are not whole rows of {k}");
    let rows = x.len() / k;
    assert_eq!(out.len(), rows * n, "fp8_gemm: output is not [{rows}, {n}]");
    let act = Fp8Rows::quantise(x, k, LAYOUT);
    let problem = Problem {
        act: &act,
        rows,
        n,
        groups: 1,
        group_cols: n,
    };
    run_pairs(&Fp8Weights { w, w_scale, k }, &problem, out, launch, faults);
}

/// The path of FP8's one-row calls under `launch`: a launch on AVX-512 BF16 whose one-row default is AVX2 keeps the VDPBF16PS GEMV, which streams FP8 faster there.
pub fn one_row_path(launch: &CpuLaunch) -> SimdPath {
    match (launch.simd, launch.gemv_simd) {
        (SimdPath::Avx512Bf16, Some(SimdPath::Avx2)) => SimdPath::Avx512Bf16,
        _ => launch.simd_for(1),
    }
}

/// The f32 bits an e4m3 code keeps once sign-extended to bit 31 with its other 7 bits at 20..26.
pub(crate) const E4M3_BITS: u32 = 0x87F0_0000;

/// The e4m3 value of `code` times 2^-120, exactly (subnormal f32 for e4m3 subnormals; the NaN codes give ±480 * 2^-120).
#[inline(always)]
pub(crate) fn decode_e4m3(code: u8) -> f32 {
    f32::from_bits((((code as i8 as i32) << 20) as u32) & E4M3_BITS)
}

/// An FP8 weight [n, k] (`w`, row-major) with its e8m0 scale grid [ceil(n/128), ceil(k/128)].
pub(crate) struct Fp8Weights<'a> {
    pub w: &'a [u8],
    pub w_scale: &'a [u8],
    pub k: usize,
}

impl Fp8Weights<'_> {
    fn wrow(&self, n: usize) -> &[u8] {
        &self.w[n * self.k..(n + 1) * self.k]
    }
}

impl BlockWeights for Fp8Weights<'_> {
    fn blocks(&self) -> usize {
        self.k.div_ceil(BLOCK)
    }

    fn act_block(&self, kb: usize) -> usize {
        kb
    }

    fn gemv_path(&self, launch: &CpuLaunch) -> SimdPath {
        one_row_path(launch)
    }

    fn fill_scales(&self, cols: &[usize; GROUP], _: SimdPath, swt: &mut [f32]) {
        let grid_k = self.blocks();
        if cols[0] / BLOCK == cols[GROUP - 1] / BLOCK {
            // One scale row for the whole group (the usual case: groups start at multiples of 16).
            let codes = &self.w_scale[cols[0] / BLOCK * grid_k..][..grid_k];
            for (row, &c) in swt.chunks_exact_mut(GROUP).zip(codes) {
                row.fill(e8m0::TABLE[c as usize]);
            }
            return;
        }
        for kb in 0..grid_k {
            for (s, &n) in swt[kb * GROUP..][..GROUP].iter_mut().zip(cols) {
                *s = e8m0::TABLE[self.w_scale[n / BLOCK * grid_k + kb] as usize];
            }
        }
    }

    fn gemv(&self, simd: SimdPath, a: &[u16], sa: &[f32], cols: Range<usize>, out: &mut [f32], faults: Faults) -> bool {
        #[cfg(target_arch = "x86_64")]
        if simd == SimdPath::Avx512 && !faults.on("order_by_tile") && !faults.on("drop_tail_block") {
            // SAFETY: the driver asserted the path is available; `gemv_avx512` checks every bound it reads.
            unsafe { super::gemv::gemv_avx512(a, sa, self.w, self.w_scale, self.k, cols, out) };
            return true;
        }
        #[cfg(target_arch = "x86_64")]
        if simd == SimdPath::Avx512Bf16 && !faults.on("order_by_tile") && !faults.on("drop_tail_block") {
            let flush = faults.on("bf16_subnormal_flush");
            // SAFETY: the driver asserted the path is available; `gemv_bf16` checks every bound it reads.
            unsafe { super::gemv::gemv_bf16(a, sa, self.w, self.w_scale, self.k, cols, out, flush) };
            return true;
        }
        #[cfg(target_arch = "x86_64")]
        if simd == SimdPath::Avx2 && !faults.on("order_by_tile") && !faults.on("drop_tail_block") {
            // SAFETY: the driver asserted the path is available (and VL is checked here); both entries check every bound they read.
            match is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl") {
                true => unsafe { super::gemv::gemv_avx2_vl(a, sa, self.w, self.w_scale, self.k, cols, out) },
                false => unsafe { super::gemv::gemv_avx2(a, sa, self.w, self.w_scale, self.k, cols, out) },
            }
            return true;
        }
        let _ = (simd, a, sa, cols, out, faults);
        false
    }

    fn row(
        &self,
        simd: SimdPath,
        a: &[u16],
        sa: &[f32],
        cols: &[usize],
        swt: &[f32],
        off: usize,
        faults: Faults,
    ) -> [f32; PAIRS] {
        #[cfg(target_arch = "x86_64")]
        if !faults.on("order_by_tile") && !faults.on("drop_tail_block") && simd != SimdPath::Portable {
            // One row: each weight row streamed on its own; the repeated padding columns are skipped.
            let distinct = cols.partition_point(|&c| c < cols[cols.len() - 1]) + 1;
            let rows: [&[u8]; PAIRS] = std::array::from_fn(|j| self.wrow(cols[j.min(distinct - 1)]));
            let scales = super::x86::RowScales { sa, swt, off };
            // SAFETY: the driver asserted the path is available; rows are `k` bytes, activations whole blocks.
            return unsafe {
                match simd {
                    SimdPath::Avx512Bf16 => {
                        let flush = faults.on("bf16_subnormal_flush");
                        super::bf16::rows(a, &rows[..distinct], self.k, &scales, flush)
                    }
                    SimdPath::Avx512 => super::x86::rows_avx512(a, &rows[..distinct], self.k, &scales),
                    _ => super::x86::rows_avx2(a, &rows[..distinct], self.k, &scales),
                }
            };
        }
        let panel = row_panel(self, sa, swt, off, cols.len());
        self.tile(SimdPath::Portable, &[a], cols, &panel, faults)
    }

    fn tile(&self, simd: SimdPath, a: &[&[u16]], cols: &[usize], panel: &[f32], faults: Faults) -> [f32; PAIRS] {
        // Planted: a tile-dependent reduction order, and a K tail that is never read.
        let sequential = faults.on("order_by_tile") && a.len() == 1;
        let k = if faults.on("drop_tail_block") {
            self.k / BLOCK * BLOCK
        } else {
            self.k
        };
        #[cfg(target_arch = "x86_64")]
        if !sequential {
            let w = |j: usize| &self.wrow(cols[j])[..k];
            // SAFETY: the driver asserted the path is available; rows are `k` bytes, activations padded blocks.
            unsafe {
                match (simd, a.len()) {
                    (SimdPath::Avx512 | SimdPath::Avx512Bf16, 4) => {
                        return super::x86::tile_avx512::<4, 4>(
                            [a[0], a[1], a[2], a[3]],
                            std::array::from_fn(w),
                            k,
                            panel,
                        );
                    }
                    (SimdPath::Avx2, 2) => {
                        return super::x86::tile_avx2::<2, 4>([a[0], a[1]], std::array::from_fn(w), k, panel);
                    }
                    _ => {}
                }
            }
        }
        let mut out = [0f32; PAIRS];
        let nr = cols.len();
        for (ri, ar) in a.iter().enumerate() {
            let mut acc = [0f32; PAIRS];
            let mut act = [0f32; BLOCK];
            for kb in 0..k.div_ceil(BLOCK) {
                let len = (k - kb * BLOCK).min(BLOCK);
                for (e, v) in act.iter_mut().enumerate() {
                    *v = bf16::bf16_to_f32(ar[kb * BLOCK + LAYOUT.position(e)]);
                }
                for (ci, &n) in cols.iter().enumerate() {
                    let wb = &self.wrow(n)[kb * BLOCK..][..len];
                    let inner = if sequential {
                        wb.iter().zip(&act).fold(0f32, |s, (&c, &x)| x * decode_e4m3(c) + s)
                    } else {
                        block_dot(&act, wb)
                    };
                    acc[ci] = inner.mul_add(panel[kb * PAIRS + ri * nr + ci], acc[ci]);
                }
            }
            out[ri * nr..(ri + 1) * nr].copy_from_slice(&acc[..nr]);
        }
        out
    }
}

/// One block's inner in lane order; products are exact in f32 (>= 2^-19, <= 8 bits), so multiply-then-add equals the FMA.
fn block_dot(act: &[f32; BLOCK], wb: &[u8]) -> f32 {
    let mut lanes = [0f32; LANES];
    for chunk in 0..2 {
        for p in 0..4 {
            for (l, lane) in lanes.iter_mut().enumerate() {
                let e = 64 * chunk + 4 * l + p;
                if e < wb.len() {
                    *lane += act[e] * decode_e4m3(wb[e]);
                }
            }
        }
    }
    reduce_lanes(lanes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfold_formats::e4m3;

    #[test]
    fn one_row_calls_keep_the_bf16_gemv_only_where_the_default_chose_avx2() {
        let launch = |simd, gemv_simd| CpuLaunch {
            simd,
            gemv_simd,
            ..CpuLaunch::serial()
        };
        let bf16 = SimdPath::Avx512Bf16;
        assert_eq!(one_row_path(&launch(bf16, Some(SimdPath::Avx2))), bf16);
        assert_eq!(one_row_path(&launch(bf16, None)), bf16, "an explicit path stays");
        assert_eq!(
            one_row_path(&launch(SimdPath::Avx512, Some(SimdPath::Avx2))),
            SimdPath::Avx2
        );
        assert_eq!(
            one_row_path(&launch(bf16, Some(SimdPath::Portable))),
            SimdPath::Portable
        );
    }

    #[test]
    fn bit_decode_is_exact_for_every_finite_code() {
        for code in 0..=255u8 {
            let want = e4m3::decode(code);
            let got = decode_e4m3(code) * 2f32.powi(120);
            if want.is_nan() {
                assert_eq!(got.abs(), 480.0);
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "code {code:#x}");
            }
        }
    }
}
