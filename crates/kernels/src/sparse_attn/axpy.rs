//! `y += a * x` with one FMA per element on every SIMD path, so every path gives the same bits.

use crate::cpu::SimdPath;

/// `y[i] = fma(a, x[i], y[i])` on `simd`.
pub fn axpy(a: f32, x: &[f32], y: &mut [f32], simd: SimdPath) {
    assert_eq!(x.len(), y.len(), "axpy of unequal lengths");
    match simd {
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
            assert!(is_x86_feature_detected!("avx512f"));
            // SAFETY: the feature is present, checked above.
            unsafe { x86::axpy_avx512(a, x, y) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: the features are present, checked above.
            unsafe { x86::axpy_avx2(a, x, y) }
        }
        _ => {
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi = a.mul_add(xi, *yi);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn axpy_avx512(a: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len();
        let va = _mm512_set1_ps(a);
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: i + 16 <= n for both slices.
            unsafe {
                let vy = _mm512_loadu_ps(y.as_ptr().add(i));
                let vx = _mm512_loadu_ps(x.as_ptr().add(i));
                _mm512_storeu_ps(y.as_mut_ptr().add(i), _mm512_fmadd_ps(va, vx, vy));
            }
            i += 16;
        }
        if i < n {
            let mask: __mmask16 = (1u32 << (n - i)) as u16 - 1;
            // SAFETY: masked loads and stores touch only the n - i valid elements.
            unsafe {
                let vy = _mm512_maskz_loadu_ps(mask, y.as_ptr().add(i));
                let vx = _mm512_maskz_loadu_ps(mask, x.as_ptr().add(i));
                _mm512_mask_storeu_ps(y.as_mut_ptr().add(i), mask, _mm512_fmadd_ps(va, vx, vy));
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy_avx2(a: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len();
        let va = _mm256_set1_ps(a);
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n for both slices.
            unsafe {
                let vy = _mm256_loadu_ps(y.as_ptr().add(i));
                let vx = _mm256_loadu_ps(x.as_ptr().add(i));
                _mm256_storeu_ps(y.as_mut_ptr().add(i), _mm256_fmadd_ps(va, vx, vy));
            }
            i += 8;
        }
        for j in i..n {
            y[j] = a.mul_add(x[j], y[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_gives_the_same_bits() {
        for n in [0, 1, 7, 8, 15, 16, 17, 31, 512] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let y0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let mut want = y0.clone();
            axpy(0.3, &x, &mut want, SimdPath::Portable);
            for simd in SimdPath::available() {
                let mut y = y0.clone();
                axpy(0.3, &x, &mut y, simd);
                assert_eq!(
                    y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "n {n} {simd}"
                );
            }
        }
    }
}
