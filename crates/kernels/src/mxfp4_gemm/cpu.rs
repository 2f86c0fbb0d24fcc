//! CPU `mxfp4_gemm`: a 32-block's inner is (l0 + l2) + (l1 + l3), lane i summing elements 8i..8i+7 by FMA in order.

use std::ops::Range;

use tensorfold_formats::{bf16, e2m1, e8m0};

use crate::cpu::{CpuLaunch, SimdPath};
use crate::faults::Faults;
use crate::gemm::act::{ACT_BLOCK, Fp8Rows, Layout};
use crate::gemm::{BlockWeights, GROUP, PAIRS, Problem, row_panel, run_pairs};

/// Values per weight scale.
pub const BLOCK: usize = 32;
/// Values per SIMD chunk: 64 weight bytes, one activation scale block.
pub(crate) const CHUNK: usize = 128;

/// Lane l of a chunk holds elements 8l..8l+7 (one 32-bit word of weight nibbles); no prescale is needed.
pub(crate) const LAYOUT: Layout = Layout {
    per_lane: 8,
    value_factor: 1.0,
    scale_factor: 1.0,
};

/// `out[r, n]`: over 32-blocks ascending `acc = fma(inner, sa[r, kb / 4] * sw[n, kb], acc)`; `w` [n, k/2], `w_scale` [n, k/32].
#[allow(clippy::too_many_arguments)]
pub fn mxfp4_gemm(
    x: &[f32],
    w: &[u8],
    w_scale: &[u8],
    n: usize,
    k: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(
        n > 0 && k > 0 && k.is_multiple_of(BLOCK),
        "mxfp4_gemm: weight [{n}, {k}] (k a multiple of 32)"
    );
    assert_eq!(w.len(), n * k / 2, "mxfp4_gemm: weight bytes are not [{n}, {}]", k / 2);
    assert_eq!(
        w_scale.len(),
        n * k / BLOCK,
        "mxfp4_gemm: scales are not [{n}, {}]",
        k / BLOCK
    );
    assert_eq!(x.len() % k, 0, "mxfp4_gemm: activations are not whole rows of {k}");
    let rows = x.len() / k;
    assert_eq!(out.len(), rows * n, "mxfp4_gemm: output is not [{rows}, {n}]");
    let act = Fp8Rows::quantise(x, k, LAYOUT);
    let problem = Problem {
        act: &act,
        rows,
        n,
        groups: 1,
        group_cols: n,
    };
    run_pairs(&Mxfp4Weights { w, w_scale, k }, &problem, out, launch, faults);
}

/// The path of MXFP4's one-row calls under `launch`: `gemv_path`.
pub fn one_row_path(launch: &CpuLaunch) -> SimdPath {
    match (launch.simd, launch.gemv_simd) {
        (SimdPath::Avx512 | SimdPath::Avx512Bf16, Some(SimdPath::Avx2)) => SimdPath::Avx512,
        _ => launch.simd_for(1),
    }
}

/// An MXFP4 weight [n, k] stored as [n, k/2] bytes with e8m0 scales [n, k/32].
struct Mxfp4Weights<'a> {
    w: &'a [u8],
    w_scale: &'a [u8],
    k: usize,
}

impl Mxfp4Weights<'_> {
    fn wrow(&self, n: usize) -> &[u8] {
        &self.w[n * self.k / 2..(n + 1) * self.k / 2]
    }
}

impl Mxfp4Weights<'_> {
    /// Every 32-block's inner for one row (`act` in element order); e4m3 x e2m1 products are exact, so a * w + lane is the FMA.
    fn inners(&self, act: &[f32], wr: &[u8], swap: bool) -> Vec<f32> {
        let blocks = self.blocks();
        let mut inners = Vec::with_capacity(blocks);
        for (c, bytes) in wr.chunks(CHUNK / 2).enumerate() {
            let acts = &act[c * CHUNK..][..CHUNK];
            let mut lanes = [0f32; 16];
            for (l, lane) in lanes.iter_mut().enumerate().take(bytes.len() / 4) {
                for q in 0..8 {
                    let byte = bytes[4 * l + q / 2];
                    let nibble = if (q % 2 == 1) != swap { byte >> 4 } else { byte & 0xF };
                    *lane += acts[8 * l + q] * e2m1::TABLE[nibble as usize];
                }
            }
            for l in lanes.chunks(4).take(blocks - 4 * c) {
                inners.push((l[0] + l[2]) + (l[1] + l[3]));
            }
        }
        inners
    }
}

impl BlockWeights for Mxfp4Weights<'_> {
    fn blocks(&self) -> usize {
        self.k / BLOCK
    }

    fn act_block(&self, kb: usize) -> usize {
        kb * BLOCK / ACT_BLOCK
    }

    fn fill_scales(&self, cols: &[usize; GROUP], simd: SimdPath, swt: &mut [f32]) {
        let blocks = self.blocks();
        let rows: [&[u8]; GROUP] = std::array::from_fn(|j| &self.w_scale[cols[j] * blocks..][..blocks]);
        let mut kb = 0;
        #[cfg(target_arch = "x86_64")]
        if simd != SimdPath::Portable {
            kb = super::x86::fill_scales(&rows, swt);
        }
        for kb in kb..blocks {
            for (s, r) in swt[kb * GROUP..][..GROUP].iter_mut().zip(&rows) {
                *s = e8m0::TABLE[r[kb] as usize];
            }
        }
    }

    /// The launch's one-row path, except that a wide launch whose one-row default is AVX2 keeps the AVX-512 GEMV, which streams MXFP4 faster there.
    fn gemv_path(&self, launch: &CpuLaunch) -> SimdPath {
        one_row_path(launch)
    }

    fn gemv(&self, simd: SimdPath, a: &[u16], sa: &[f32], cols: Range<usize>, out: &mut [f32], faults: Faults) -> bool {
        #[cfg(target_arch = "x86_64")]
        if simd == SimdPath::Avx512 && !faults.on("swap_nibbles") && !faults.on("order_by_tile") {
            // SAFETY: the driver asserted the path is available; `gemv_avx512` checks every bound it reads.
            unsafe { super::gemv::gemv_avx512(a, sa, self.w, self.w_scale, self.k, cols, out) };
            return true;
        }
        #[cfg(target_arch = "x86_64")]
        if simd == SimdPath::Avx2 && !faults.on("swap_nibbles") && !faults.on("order_by_tile") {
            // SAFETY: the driver asserted the path is available; `gemv_avx2` checks every bound it reads.
            unsafe { super::gemv::gemv_avx2(a, sa, self.w, self.w_scale, self.k, cols, out) };
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
        if matches!(simd, SimdPath::Avx512 | SimdPath::Avx512Bf16)
            && !faults.on("swap_nibbles")
            && !faults.on("order_by_tile")
        {
            let distinct = cols.partition_point(|&c| c < cols[cols.len() - 1]) + 1;
            let w = |j: usize| self.wrow(cols[j.min(distinct - 1)]);
            // SAFETY: the driver asserted the path is available; rows hold k/2 bytes, activations whole chunks.
            return unsafe {
                if simd == SimdPath::Avx512Bf16 {
                    let swap = faults.on("bf16_pair_swap");
                    super::bf16::rows(a, sa, swt, off, distinct, &w, self.k, swap)
                } else {
                    super::x86::rows_avx512(a, sa, swt, off, distinct, &w, self.k, None)
                }
            };
        }
        let panel = row_panel(self, sa, swt, off, cols.len());
        self.tile(simd, &[a], cols, &panel, faults)
    }

    fn tile(&self, simd: SimdPath, a: &[&[u16]], cols: &[usize], panel: &[f32], faults: Faults) -> [f32; PAIRS] {
        // Planted: the two nibbles of a byte swapped, and blocks summed in reverse in one-row tiles.
        let swap = faults.on("swap_nibbles");
        let sequential = faults.on("order_by_tile") && a.len() == 1;
        #[cfg(target_arch = "x86_64")]
        if !swap && !sequential {
            let w = |j: usize| self.wrow(cols[j]);
            // SAFETY: the driver asserted the path is available; rows hold k/2 bytes, activations whole chunks.
            unsafe {
                match (simd, a.len()) {
                    (SimdPath::Avx512 | SimdPath::Avx512Bf16, 4) => {
                        return super::x86::tile_avx512(
                            [a[0], a[1], a[2], a[3]],
                            std::array::from_fn(w),
                            self.k,
                            panel,
                        );
                    }
                    (SimdPath::Avx2, 1 | 2) => return super::x86::pairs_avx2(a, cols.len(), &w, self.k, panel),
                    _ => {}
                }
            }
        }
        let mut out = [0f32; PAIRS];
        let nr = cols.len();
        for (ri, ar) in a.iter().enumerate() {
            let act: Vec<f32> = (0..ar.len())
                .map(|e| bf16::bf16_to_f32(ar[LAYOUT.position(e)]))
                .collect();
            for (ci, &n) in cols.iter().enumerate() {
                let inners = self.inners(&act, self.wrow(n), swap);
                let mut acc = 0f32;
                let order: Box<dyn Iterator<Item = usize>> = if sequential {
                    Box::new((0..inners.len()).rev())
                } else {
                    Box::new(0..inners.len())
                };
                for kb in order {
                    acc = inners[kb].mul_add(panel[kb * PAIRS + ri * nr + ci], acc);
                }
                out[ri * nr + ci] = acc;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_calls_keep_the_wide_gemv_only_where_the_default_chose_avx2() {
        let launch = |simd, gemv_simd| CpuLaunch {
            simd,
            gemv_simd,
            ..CpuLaunch::serial()
        };
        for wide in [SimdPath::Avx512, SimdPath::Avx512Bf16] {
            assert_eq!(one_row_path(&launch(wide, Some(SimdPath::Avx2))), SimdPath::Avx512);
            assert_eq!(one_row_path(&launch(wide, None)), wide, "an explicit path stays");
        }
        assert_eq!(one_row_path(&launch(SimdPath::Avx2, None)), SimdPath::Avx2);
        let portable = launch(SimdPath::Avx512, Some(SimdPath::Portable));
        assert_eq!(one_row_path(&portable), SimdPath::Portable);
    }
}
