//! Dot products with 16 fixed accumulator lanes and FMA on every SIMD path, so all paths give the same bits.

use super::SimdPath;

/// Accumulator lanes: element i always accumulates into lane i % 16.
pub const LANES: usize = 16;

/// Sums 16 lanes by a fixed halving tree: (j, j+8), then (j, j+4), (j, j+2), (0, 1).
#[inline(always)]
pub fn reduce_lanes(mut v: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for j in 0..width {
            v[j] += v[j + width];
        }
        width /= 2;
    }
    v[0]
}

/// `sum_i a[i] * b[i]` in the fixed lane order, on `simd`.
pub fn dot(a: &[f32], b: &[f32], simd: SimdPath) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of unequal lengths");
    match simd {
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
            assert!(is_x86_feature_detected!("avx512f"));
            // SAFETY: the feature is present, checked above.
            unsafe { x86::dot_avx512(a, b) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: the features are present, checked above.
            unsafe { x86::dot_avx2(a, b) }
        }
        _ => dot_portable(a, b),
    }
}

/// `dot(a, b[j], simd)` for four rows of `b` at once, bit for bit.
pub fn dot4(a: &[f32], b: [&[f32]; 4], simd: SimdPath) -> [f32; 4] {
    assert!(b.iter().all(|r| r.len() == a.len()), "dot4 of unequal lengths");
    match simd {
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 | SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: the features are present, checked above.
            unsafe { x86::dot4_avx2(a, b) }
        }
        _ => b.map(|r| dot_portable(a, r)),
    }
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let full = a.len() / LANES * LANES;
    for (ca, cb) in a[..full].chunks_exact(LANES).zip(b[..full].chunks_exact(LANES)) {
        for j in 0..LANES {
            acc[j] = ca[j].mul_add(cb[j], acc[j]);
        }
    }
    if full < a.len() {
        let mut ta = [0f32; LANES];
        let mut tb = [0f32; LANES];
        ta[..a.len() - full].copy_from_slice(&a[full..]);
        tb[..a.len() - full].copy_from_slice(&b[full..]);
        for j in 0..LANES {
            acc[j] = ta[j].mul_add(tb[j], acc[j]);
        }
    }
    reduce_lanes(acc)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{LANES, reduce_lanes};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len();
        let mut acc = _mm512_setzero_ps();
        let mut i = 0;
        while i + LANES <= n {
            // SAFETY: i + 16 <= n for both slices.
            let (va, vb) = unsafe { (_mm512_loadu_ps(a.as_ptr().add(i)), _mm512_loadu_ps(b.as_ptr().add(i))) };
            acc = _mm512_fmadd_ps(va, vb, acc);
            i += LANES;
        }
        if i < n {
            let mask: __mmask16 = (1u32 << (n - i)) as u16 - 1;
            // SAFETY: masked loads touch only the n - i valid elements.
            let (va, vb) = unsafe {
                (
                    _mm512_maskz_loadu_ps(mask, a.as_ptr().add(i)),
                    _mm512_maskz_loadu_ps(mask, b.as_ptr().add(i)),
                )
            };
            acc = _mm512_fmadd_ps(va, vb, acc);
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: lanes holds 16 f32.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), acc) };
        reduce_lanes(lanes)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len();
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + LANES <= n {
            // SAFETY: i + 16 <= n for both slices.
            unsafe {
                lo = _mm256_fmadd_ps(
                    _mm256_loadu_ps(a.as_ptr().add(i)),
                    _mm256_loadu_ps(b.as_ptr().add(i)),
                    lo,
                );
                hi = _mm256_fmadd_ps(
                    _mm256_loadu_ps(a.as_ptr().add(i + 8)),
                    _mm256_loadu_ps(b.as_ptr().add(i + 8)),
                    hi,
                );
            }
            i += LANES;
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: lanes holds 16 f32.
        unsafe {
            _mm256_storeu_ps(lanes.as_mut_ptr(), lo);
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), hi);
        }
        if i < n {
            let mut ta = [0f32; LANES];
            let mut tb = [0f32; LANES];
            ta[..n - i].copy_from_slice(&a[i..]);
            tb[..n - i].copy_from_slice(&b[i..]);
            for j in 0..LANES {
                lanes[j] = ta[j].mul_add(tb[j], lanes[j]);
            }
        }
        reduce_lanes(lanes)
    }

    /// Four dots of `a`, one per row of `b`, each in `dot`'s lanes; the rows' chains run side by side.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot4_avx2(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
        let n = a.len();
        assert!(b.iter().all(|r| r.len() == n));
        let (mut lo, mut hi) = ([_mm256_setzero_ps(); 4], [_mm256_setzero_ps(); 4]);
        let mut i = 0;
        while i + LANES <= n {
            // SAFETY: i + 16 <= n for `a` and every row.
            unsafe {
                let (xa, xb) = (
                    _mm256_loadu_ps(a.as_ptr().add(i)),
                    _mm256_loadu_ps(a.as_ptr().add(i + 8)),
                );
                for j in 0..4 {
                    lo[j] = _mm256_fmadd_ps(xa, _mm256_loadu_ps(b[j].as_ptr().add(i)), lo[j]);
                    hi[j] = _mm256_fmadd_ps(xb, _mm256_loadu_ps(b[j].as_ptr().add(i + 8)), hi[j]);
                }
            }
            i += LANES;
        }
        let mut out = [0f32; 4];
        for j in 0..4 {
            let mut lanes = [0f32; LANES];
            // SAFETY: lanes holds 16 f32.
            unsafe {
                _mm256_storeu_ps(lanes.as_mut_ptr(), lo[j]);
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), hi[j]);
            }
            if i < n {
                let mut ta = [0f32; LANES];
                let mut tb = [0f32; LANES];
                ta[..n - i].copy_from_slice(&a[i..]);
                tb[..n - i].copy_from_slice(&b[j][i..]);
                for l in 0..LANES {
                    lanes[l] = ta[l].mul_add(tb[l], lanes[l]);
                }
            }
            out[j] = reduce_lanes(lanes);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_gives_the_same_bits() {
        let mut x = 0.123f32;
        let mut next = || {
            x = (x * 3.7 + 0.31).fract();
            x - 0.5
        };
        for n in [0, 1, 15, 16, 17, 31, 257, 4096 + 3] {
            let a: Vec<f32> = (0..n).map(|_| next()).collect();
            let b: Vec<f32> = (0..n).map(|_| next()).collect();
            let want = dot(&a, &b, SimdPath::Portable);
            let exact: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
            assert!((want as f64 - exact).abs() <= 1e-5 * (1.0 + exact.abs()), "n {n}");
            let rows: Vec<Vec<f32>> = (0..3).map(|_| (0..n).map(|_| next()).collect()).collect();
            let four = [&b[..], &rows[0], &rows[1], &rows[2]];
            for simd in SimdPath::available() {
                assert_eq!(dot(&a, &b, simd).to_bits(), want.to_bits(), "n {n} {simd}");
                let got = dot4(&a, four, simd);
                for (j, r) in four.iter().enumerate() {
                    assert_eq!(
                        got[j].to_bits(),
                        dot(&a, r, SimdPath::Portable).to_bits(),
                        "n {n} {simd} row {j}"
                    );
                }
            }
        }
    }
}
