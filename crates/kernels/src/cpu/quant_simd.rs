//! Per-block FP8/FP4 round trips on every SIMD path, bit-identical to `quant::round_trip_e4m3_block` and `round_trip_e2m1_block`.

use tensorfold_formats::{e2m1, e4m3};

use super::SimdPath;
use super::quant::{FP4_AMAX_FLOOR, FP8_AMAX_FLOOR, amax, pow2_scale, round_trip_e2m1_block, round_trip_e4m3_block};

/// The value grid a block is rounded to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// FP8 e4m3fn, amax floor 1e-4, qmax 448.
    E4m3,
    /// FP4 e2m1, amax floor 6 * 2^-126, qmax 6.
    E2m1,
}

/// How the vector paths round `|q| <= qmax` to a grid: bit rounding for normals, a magic add below `min_normal`.
#[derive(Clone, Copy)]
struct Shape {
    qmax: f32,
    floor: f32,
    /// Smallest normal of the format.
    min_normal: f32,
    /// `1.5 * 2^(23 + e)` where `2^e` is the subnormal step: adding and subtracting it rounds to that step, ties to even.
    magic: f32,
    /// f32 mantissa bits the format drops.
    drop_bits: u32,
}

impl Grid {
    fn shape(self) -> Shape {
        match self {
            Grid::E4m3 => Shape {
                qmax: e4m3::MAX,
                floor: FP8_AMAX_FLOOR,
                min_normal: 1.0 / 64.0,
                magic: 24576.0,
                drop_bits: 20,
            },
            Grid::E2m1 => Shape {
                qmax: e2m1::MAX,
                floor: FP4_AMAX_FLOOR,
                min_normal: 1.0,
                magic: 6_291_456.0,
                drop_bits: 22,
            },
        }
    }

    /// One value's round trip through the format's own encoder, at block scale `s`.
    fn round_trip(self, v: f32, s: f32) -> f32 {
        match self {
            Grid::E4m3 => e4m3::decode(e4m3::encode((v / s).clamp(-e4m3::MAX, e4m3::MAX))) * s,
            Grid::E2m1 => e2m1::decode(e2m1::encode((v / s).clamp(-e2m1::MAX, e2m1::MAX))) * s,
        }
    }
}

/// Round-trips `x` in place per `block` values (the last block may be shorter), on `simd`; NaN-free inputs.
pub fn round_trip_blocks(x: &mut [f32], block: usize, grid: Grid, simd: SimdPath) {
    assert!(block > 0, "round_trip_blocks: block is 0");
    for b in x.chunks_mut(block) {
        match simd {
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
                assert!(is_x86_feature_detected!("avx512f"));
                // SAFETY: the feature is present, checked above.
                unsafe { x86::block_avx512(b, grid) }
            }
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx2 => {
                assert!(is_x86_feature_detected!("avx2"));
                // SAFETY: the feature is present, checked above.
                unsafe { x86::block_avx2(b, grid) }
            }
            _ => match grid {
                Grid::E4m3 => round_trip_e4m3_block(b),
                Grid::E2m1 => round_trip_e2m1_block(b),
            },
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::e4m3_trip128;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Grid, Shape, amax, pow2_scale};
    use std::arch::x86_64::*;

    const ABS: i32 = 0x7FFF_FFFF;
    const SIGN: i32 = i32::MIN;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn block_avx512(b: &mut [f32], grid: Grid) {
        let sh = grid.shape();
        let full = b.len() / 16 * 16;
        let mut m = _mm512_setzero_ps();
        for k in (0..full).step_by(16) {
            // SAFETY: k + 16 <= b.len().
            let v = unsafe { _mm512_loadu_si512(b.as_ptr().add(k).cast()) };
            m = _mm512_max_ps(m, _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(ABS))));
        }
        let mut lanes = [0f32; 16];
        // SAFETY: lanes holds 16 f32.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), m) };
        let s = pow2_scale(amax(&lanes).max(amax(&b[full..])), sh.floor, sh.qmax);
        for k in (0..full).step_by(16) {
            // SAFETY: k + 16 <= b.len().
            unsafe {
                let v = _mm512_loadu_ps(b.as_ptr().add(k));
                _mm512_storeu_ps(b.as_mut_ptr().add(k), trip16(v, s, sh));
            }
        }
        for v in &mut b[full..] {
            *v = grid.round_trip(*v, s);
        }
    }

    /// 128 finite values' e4m3 round trip (as `block_avx512`) and their scale; `None` where a value is not finite.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn e4m3_trip128(x: &[f32]) -> Option<([__m512; 8], f32)> {
        assert_eq!(x.len(), 128);
        let sh = Grid::E4m3.shape();
        // SAFETY: 8 vectors of 16 inside x.
        let v: [__m512i; 8] = std::array::from_fn(|m| unsafe { _mm512_loadu_si512(x.as_ptr().add(16 * m).cast()) });
        // Finite magnitudes order as their bits, so the largest is the block's amax.
        let top = v.iter().fold(_mm512_setzero_si512(), |t, &v| {
            _mm512_max_epu32(t, _mm512_and_si512(v, _mm512_set1_epi32(ABS)))
        });
        let top = _mm512_reduce_max_epu32(top);
        if top >= f32::INFINITY.to_bits() {
            return None;
        }
        let s = pow2_scale(f32::from_bits(top), sh.floor, sh.qmax);
        Some((std::array::from_fn(|m| trip16(_mm512_castsi512_ps(v[m]), s, sh)), s))
    }

    /// One vector's round trip at power-of-two scale `s`: dividing by `s` is multiplying by its exact inverse.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn trip16(v: __m512, s: f32, sh: Shape) -> __m512 {
        let vs = _mm512_set1_ps(s);
        let inv = 1.0 / s;
        let q = if inv.is_normal() && inv * s == 1.0 {
            _mm512_mul_ps(v, _mm512_set1_ps(inv))
        } else {
            _mm512_div_ps(v, vs)
        };
        let half = _mm512_set1_epi32((1 << (sh.drop_bits - 1)) - 1);
        let shift = _mm512_set1_epi32(sh.drop_bits as i32);
        let keep = _mm512_set1_epi32(-1 << sh.drop_bits);
        let q = _mm512_min_ps(_mm512_set1_ps(sh.qmax), _mm512_max_ps(_mm512_set1_ps(-sh.qmax), q));
        let qi = _mm512_castps_si512(q);
        let a = _mm512_and_si512(qi, _mm512_set1_epi32(ABS));
        let odd = _mm512_and_si512(_mm512_srlv_epi32(a, shift), _mm512_set1_epi32(1));
        let normal = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(a, half), odd), keep);
        let af = _mm512_castsi512_ps(a);
        let sub = _mm512_sub_ps(_mm512_add_ps(af, _mm512_set1_ps(sh.magic)), _mm512_set1_ps(sh.magic));
        let is_sub = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(af, _mm512_set1_ps(sh.min_normal));
        let r = _mm512_mask_blend_ps(is_sub, _mm512_castsi512_ps(normal), sub);
        let signed = _mm512_or_si512(_mm512_castps_si512(r), _mm512_and_si512(qi, _mm512_set1_epi32(SIGN)));
        _mm512_mul_ps(_mm512_castsi512_ps(signed), vs)
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn block_avx2(b: &mut [f32], grid: Grid) {
        let sh = grid.shape();
        let full = b.len() / 8 * 8;
        let abs = _mm256_set1_epi32(ABS);
        let mut m = _mm256_setzero_ps();
        for k in (0..full).step_by(8) {
            // SAFETY: k + 8 <= b.len().
            let v = unsafe { _mm256_loadu_si256(b.as_ptr().add(k).cast()) };
            m = _mm256_max_ps(m, _mm256_castsi256_ps(_mm256_and_si256(v, abs)));
        }
        let mut lanes = [0f32; 8];
        // SAFETY: lanes holds 8 f32.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
        let s = pow2_scale(amax(&lanes).max(amax(&b[full..])), sh.floor, sh.qmax);
        let vs = _mm256_set1_ps(s);
        let half = _mm256_set1_epi32((1 << (sh.drop_bits - 1)) - 1);
        let shift = _mm256_set1_epi32(sh.drop_bits as i32);
        let keep = _mm256_set1_epi32(-1 << sh.drop_bits);
        for k in (0..full).step_by(8) {
            // SAFETY: k + 8 <= b.len().
            let v = unsafe { _mm256_loadu_ps(b.as_ptr().add(k)) };
            let q = _mm256_div_ps(v, vs);
            let q = _mm256_min_ps(_mm256_set1_ps(sh.qmax), _mm256_max_ps(_mm256_set1_ps(-sh.qmax), q));
            let qi = _mm256_castps_si256(q);
            let a = _mm256_and_si256(qi, abs);
            let odd = _mm256_and_si256(_mm256_srlv_epi32(a, shift), _mm256_set1_epi32(1));
            let normal = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(a, half), odd), keep);
            let af = _mm256_castsi256_ps(a);
            let sub = _mm256_sub_ps(_mm256_add_ps(af, _mm256_set1_ps(sh.magic)), _mm256_set1_ps(sh.magic));
            let is_sub = _mm256_cmp_ps::<_CMP_LT_OQ>(af, _mm256_set1_ps(sh.min_normal));
            let r = _mm256_blendv_ps(_mm256_castsi256_ps(normal), sub, is_sub);
            let signed = _mm256_or_si256(_mm256_castps_si256(r), _mm256_and_si256(qi, _mm256_set1_epi32(SIGN)));
            let y = _mm256_mul_ps(_mm256_castsi256_ps(signed), vs);
            // SAFETY: k + 8 <= b.len().
            unsafe { _mm256_storeu_ps(b.as_mut_ptr().add(k), y) };
        }
        for v in &mut b[full..] {
            *v = grid.round_trip(*v, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Blocks of random magnitudes, exact grid midpoints (ties) and zeros.
    fn blocks(grid: Grid, rng: &mut Rng, len: usize) -> Vec<f32> {
        let mut x = Vec::with_capacity(len);
        while x.len() < len {
            let kind = rng.below(4);
            let mag = 2f32.powi(rng.below(60) as i32 - 30);
            for i in 0..32 {
                let v = match kind {
                    0 => mag * rng.normal(),
                    // e4m3 and e2m1 midpoints are odd multiples of 2^-10 / 2^-2 relative to a power-of-two scale.
                    1 if i == 0 => mag * grid.shape().qmax,
                    1 => {
                        let step = if grid == Grid::E4m3 { 1024.0 } else { 4.0 };
                        mag * (rng.below(2 * grid.shape().qmax as u64 * step as u64) as f32 / step - grid.shape().qmax)
                    }
                    2 => 0.0 * rng.normal(),
                    _ => f32::from_bits(rng.next_u64() as u32 & 0x3FFF_FFFF) * if i % 2 == 0 { 1.0 } else { -1.0 },
                };
                x.push(v);
            }
        }
        x.truncate(len);
        x
    }

    #[test]
    fn every_path_matches_the_format_encoders() {
        let mut rng = Rng::new(5, 6);
        for grid in [Grid::E4m3, Grid::E2m1] {
            for (len, block) in [(4096, 32), (4096, 64), (4096, 128), (4096 + 17, 128), (31, 64), (1, 32)] {
                let x = blocks(grid, &mut rng, len);
                let mut want = x.clone();
                round_trip_blocks(&mut want, block, grid, SimdPath::Portable);
                for simd in SimdPath::available() {
                    let mut got = x.clone();
                    round_trip_blocks(&mut got, block, grid, simd);
                    let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{grid:?} {simd} len {len} block {block}");
                }
            }
        }
    }
    #[test]
    fn every_tie_on_the_fine_grid_rounds_like_the_encoders() {
        for (grid, step) in [(Grid::E4m3, 1024.0), (Grid::E2m1, 4.0)] {
            let qmax = grid.shape().qmax;
            let n = (2.0 * qmax * step) as usize + 1;
            // Every block starts with qmax, so its scale is 1 and every step-grid midpoint is a tie.
            let x: Vec<f32> = (0..n)
                .map(|k| if k % 128 == 0 { qmax } else { k as f32 / step - qmax })
                .collect();
            let mut want = x.clone();
            round_trip_blocks(&mut want, 128, grid, SimdPath::Portable);
            for simd in SimdPath::available() {
                let mut got = x.clone();
                round_trip_blocks(&mut got, 128, grid, simd);
                assert!(
                    got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{grid:?} {simd}"
                );
            }
        }
    }
}
