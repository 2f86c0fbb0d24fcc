//! AVX-512 and AVX2 `swiglu` rows with a vector `exp` that repeats `cpu::math::exp` operation for operation.

use std::arch::x86_64::*;

use crate::cpu::math::{EXP_MAX, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, LOG2E};

/// Round to nearest even, exceptions suppressed.
const RNE: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

#[target_feature(enable = "avx512f")]
fn exp512(x: __m512) -> __m512 {
    let n = _mm512_roundscale_ps::<RNE>(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)));
    let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), x);
    let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_LO), r);
    let mut p = _mm512_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let ni = _mm512_cvtps_epi32(n);
    let a = _mm512_max_epi32(_mm512_min_epi32(ni, _mm512_set1_epi32(127)), _mm512_set1_epi32(-126));
    let b = _mm512_sub_epi32(ni, a);
    let b = _mm512_max_epi32(
        _mm512_min_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(127)), _mm512_set1_epi32(254)),
        _mm512_set1_epi32(1),
    );
    let fa = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(a, _mm512_set1_epi32(127))));
    let fb = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(b));
    // Multiplying by fb = 1 is exact, so this equals the scalar `p * a` in range.
    let y = _mm512_mul_ps(_mm512_mul_ps(p, fa), fb);
    let y = _mm512_mask_blend_ps(
        _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, _mm512_set1_ps(EXP_MAX)),
        y,
        _mm512_set1_ps(f32::INFINITY),
    );
    let y = _mm512_mask_blend_ps(
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_set1_ps(EXP_MIN)),
        y,
        _mm512_setzero_ps(),
    );
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), y, x)
}

/// Whole 16-value vectors of one row; returns how many values it did.
#[target_feature(enable = "avx512f")]
pub fn swiglu_avx512(g: &[f32], u: &[f32], w: f32, limit: f32, up_limit: f32, h: &mut [f32]) -> usize {
    let full = h.len() / 16 * 16;
    let (lim, ulo, uhi, vw) = (
        _mm512_set1_ps(limit),
        _mm512_set1_ps(-up_limit),
        _mm512_set1_ps(up_limit),
        _mm512_set1_ps(w),
    );
    let one = _mm512_set1_ps(1.0);
    for k in (0..full).step_by(16) {
        // SAFETY: k + 16 <= len of g, u and h (equal lengths).
        let (gv, uv) = unsafe { (_mm512_loadu_ps(g.as_ptr().add(k)), _mm512_loadu_ps(u.as_ptr().add(k))) };
        let gc = _mm512_min_ps(lim, gv);
        let uc = _mm512_min_ps(uhi, _mm512_max_ps(ulo, uv));
        let neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(gc), _mm512_set1_epi32(i32::MIN)));
        let sig = _mm512_div_ps(one, _mm512_add_ps(one, exp512(neg)));
        let y = _mm512_mul_ps(vw, _mm512_mul_ps(_mm512_mul_ps(gc, sig), uc));
        // SAFETY: k + 16 <= h.len().
        unsafe { _mm512_storeu_ps(h.as_mut_ptr().add(k), y) };
    }
    full
}

#[target_feature(enable = "avx2,fma")]
fn exp256(x: __m256) -> __m256 {
    let n = _mm256_round_ps::<RNE>(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)));
    let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
    let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
    let mut p = _mm256_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let ni = _mm256_cvtps_epi32(n);
    let a = _mm256_max_epi32(_mm256_min_epi32(ni, _mm256_set1_epi32(127)), _mm256_set1_epi32(-126));
    let b = _mm256_sub_epi32(ni, a);
    let b = _mm256_max_epi32(
        _mm256_min_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(127)), _mm256_set1_epi32(254)),
        _mm256_set1_epi32(1),
    );
    let fa = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(a, _mm256_set1_epi32(127))));
    let fb = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(b));
    let y = _mm256_mul_ps(_mm256_mul_ps(p, fa), fb);
    let y = _mm256_blendv_ps(
        y,
        _mm256_set1_ps(f32::INFINITY),
        _mm256_cmp_ps::<_CMP_GT_OQ>(x, _mm256_set1_ps(EXP_MAX)),
    );
    let y = _mm256_blendv_ps(
        y,
        _mm256_setzero_ps(),
        _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(EXP_MIN)),
    );
    _mm256_blendv_ps(y, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
}

/// Whole 8-value vectors of one row; returns how many values it did.
#[target_feature(enable = "avx2,fma")]
pub fn swiglu_avx2(g: &[f32], u: &[f32], w: f32, limit: f32, up_limit: f32, h: &mut [f32]) -> usize {
    let full = h.len() / 8 * 8;
    let (lim, ulo, uhi, vw) = (
        _mm256_set1_ps(limit),
        _mm256_set1_ps(-up_limit),
        _mm256_set1_ps(up_limit),
        _mm256_set1_ps(w),
    );
    let one = _mm256_set1_ps(1.0);
    for k in (0..full).step_by(8) {
        // SAFETY: k + 8 <= len of g, u and h (equal lengths).
        let (gv, uv) = unsafe { (_mm256_loadu_ps(g.as_ptr().add(k)), _mm256_loadu_ps(u.as_ptr().add(k))) };
        let gc = _mm256_min_ps(lim, gv);
        let uc = _mm256_min_ps(uhi, _mm256_max_ps(ulo, uv));
        let neg = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(gc), _mm256_set1_epi32(i32::MIN)));
        let sig = _mm256_div_ps(one, _mm256_add_ps(one, exp256(neg)));
        let y = _mm256_mul_ps(vw, _mm256_mul_ps(_mm256_mul_ps(gc, sig), uc));
        // SAFETY: k + 8 <= h.len().
        unsafe { _mm256_storeu_ps(h.as_mut_ptr().add(k), y) };
    }
    full
}
