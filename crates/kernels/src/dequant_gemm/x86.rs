//! AVX2 decode of FP8 weight rows for `dequant_gemm`: e4m3 codes to f32 by shifts, the NaN codes by the table.

use std::arch::x86_64::*;

use tensorfold_formats::e4m3;

/// `out[i] = e4m3::TABLE[codes[i]] * s` for every code, bit for bit.
#[target_feature(enable = "avx2,fma")]
pub(super) fn decode_fp8(codes: &[u8], s: f32, out: &mut [f32]) {
    assert_eq!(codes.len(), out.len(), "decode_fp8: codes and values differ in length");
    let whole = codes.len() / 8 * 8;
    let nan_bits = _mm256_set1_epi32(0x7F);
    let (bits, up, scale) = (
        _mm256_set1_epi32(crate::fp8_gemm::E4M3_BITS as i32),
        _mm256_set1_ps(2f32.powi(120)),
        _mm256_set1_ps(s),
    );
    for i in (0..whole).step_by(8) {
        // SAFETY: 8 codes and 8 values at i < whole.
        unsafe {
            let c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(codes.as_ptr().add(i) as *const __m128i));
            // The code's sign to bit 31 and its 7 other bits to 20..26: the value times 2^-120, exactly.
            let v = _mm256_and_si256(_mm256_srai_epi32::<4>(_mm256_slli_epi32::<24>(c)), bits);
            let v = _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(v), up), scale);
            _mm256_storeu_ps(out.as_mut_ptr().add(i), v);
            // The NaN codes (0x7F, 0xFF) decode to 480 by shifts; the table's NaN replaces them.
            let nan = _mm256_cmpeq_epi32(_mm256_and_si256(c, nan_bits), nan_bits);
            if _mm256_testz_si256(nan, nan) == 0 {
                for j in i..i + 8 {
                    out[j] = e4m3::TABLE[codes[j] as usize] * s;
                }
            }
        }
    }
    for (v, &c) in out[whole..].iter_mut().zip(&codes[whole..]) {
        *v = e4m3::TABLE[c as usize] * s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_decode_is_the_table_for_every_code_and_scale() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        // Every code, three times and a partial tail, against scales from the smallest to the largest e8m0.
        let codes: Vec<u8> = (0..800).map(|i| (i * 7 % 256) as u8).collect();
        for code in [0u8, 1, 100, 127, 128, 200, 254, 255] {
            let s = tensorfold_formats::e8m0::TABLE[code as usize];
            let mut got = vec![0f32; codes.len()];
            // SAFETY: avx2 and fma are present, checked above.
            unsafe { decode_fp8(&codes, s, &mut got) };
            for (&c, g) in codes.iter().zip(&got) {
                let want = e4m3::TABLE[c as usize] * s;
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "code {c:#x} scale {s:e}: {g:e} vs {want:e}"
                );
            }
        }
    }
}
