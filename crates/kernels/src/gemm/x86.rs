//! x86 building blocks of the GEMM tiles: many 16-lane tree sums at once, a 16x16 byte transpose, e8m0 decoding.

use std::arch::x86_64::*;

/// Sixteen `reduce_lanes` tree sums at once: lane i of the result is the tree sum of `v[i]`'s 16 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
pub fn reduce16(v: [__m512; 16]) -> __m512 {
    // Slot s carries vector (s % 4) * 4 + s / 4, so the sums come out in input order.
    let at = |s: usize| v[(s % 4) * 4 + s / 4];
    let mut w = [_mm512_setzero_ps(); 8];
    for (p, w) in w.iter_mut().enumerate() {
        // Lanes (j, j + 8).
        let (a, b) = (at(2 * p), at(2 * p + 1));
        *w = _mm512_add_ps(_mm512_shuffle_f32x4::<0x44>(a, b), _mm512_shuffle_f32x4::<0xEE>(a, b));
    }
    let mut z = [_mm512_setzero_ps(); 4];
    for (q, z) in z.iter_mut().enumerate() {
        // Lanes (j, j + 4).
        let (c, d) = (w[2 * q], w[2 * q + 1]);
        *z = _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(c, d), _mm512_shuffle_f32x4::<0xDD>(c, d));
    }
    // Lanes (j, j + 2), then (0, 1).
    let u0 = _mm512_add_ps(
        _mm512_shuffle_ps::<0x44>(z[0], z[1]),
        _mm512_shuffle_ps::<0xEE>(z[0], z[1]),
    );
    let u1 = _mm512_add_ps(
        _mm512_shuffle_ps::<0x44>(z[2], z[3]),
        _mm512_shuffle_ps::<0xEE>(z[2], z[3]),
    );
    _mm512_add_ps(_mm512_shuffle_ps::<0x88>(u0, u1), _mm512_shuffle_ps::<0xDD>(u0, u1))
}

/// Four `reduce_lanes` tree sums at once: lane i of the result is the tree sum of `v[i]`'s 16 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
pub fn reduce4(v: [__m512; 4]) -> __m128 {
    // Lanes (j, j + 8): quarters 0-1 of `w[0]` hold v[0]'s eight sums, quarters 2-3 v[1]'s.
    let pair = |i: usize| {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(v[i], v[i + 1]),
            _mm512_shuffle_f32x4::<0xEE>(v[i], v[i + 1]),
        )
    };
    let w = [pair(0), pair(2)];
    // Lanes (j, j + 4): quarter i holds v[i]'s four sums.
    let z = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x88>(w[0], w[1]),
        _mm512_shuffle_f32x4::<0xDD>(w[0], w[1]),
    );
    // Lanes (j, j + 2), then (0, 1), in every quarter; lane 0 of each quarter to the front.
    let u = _mm512_add_ps(z, _mm512_permute_ps::<0x4E>(z));
    let s = _mm512_add_ps(u, _mm512_permute_ps::<0xB1>(u));
    let first = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_castps512_ps128(_mm512_permutexvar_ps(first, s))
}

/// Eight tree sums at once from 16-lane accumulators already folded once (`t[i]` lane j = lane j + lane j + 8).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub fn reduce8(t: [__m256; 8]) -> __m256 {
    // Slot s carries vector (s % 2) * 4 + s / 2, so the sums come out in input order.
    let at = |s: usize| t[(s % 2) * 4 + s / 2];
    let mut z = [_mm256_setzero_ps(); 4];
    for (q, z) in z.iter_mut().enumerate() {
        // Lanes (j, j + 4).
        let (a, b) = (at(2 * q), at(2 * q + 1));
        *z = _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(a, b),
            _mm256_permute2f128_ps::<0x31>(a, b),
        );
    }
    // Lanes (j, j + 2), then (0, 1).
    let u0 = _mm256_add_ps(
        _mm256_shuffle_ps::<0x44>(z[0], z[1]),
        _mm256_shuffle_ps::<0xEE>(z[0], z[1]),
    );
    let u1 = _mm256_add_ps(
        _mm256_shuffle_ps::<0x44>(z[2], z[3]),
        _mm256_shuffle_ps::<0xEE>(z[2], z[3]),
    );
    _mm256_add_ps(_mm256_shuffle_ps::<0x88>(u0, u1), _mm256_shuffle_ps::<0xDD>(u0, u1))
}

/// Four `hsum8` tree sums at once: lane i of the result is `hsum8(t[i])`.
#[inline]
#[target_feature(enable = "avx2")]
pub fn reduce4x8(t: [__m256; 4]) -> __m128 {
    // Lanes (j, j + 4).
    let q = t.map(|v| _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v)));
    // Lanes (j, j + 2), then (0, 1).
    let u0 = _mm_add_ps(_mm_shuffle_ps::<0x44>(q[0], q[1]), _mm_shuffle_ps::<0xEE>(q[0], q[1]));
    let u1 = _mm_add_ps(_mm_shuffle_ps::<0x44>(q[2], q[3]), _mm_shuffle_ps::<0xEE>(q[2], q[3]));
    _mm_add_ps(_mm_shuffle_ps::<0x88>(u0, u1), _mm_shuffle_ps::<0xDD>(u0, u1))
}

/// Transposes 16 rows of 16 bytes: output row c holds byte c of every input row.
#[inline]
pub fn transpose16(mut x: [__m128i; 16]) -> [__m128i; 16] {
    // Each round rotates the 8-bit (row, byte) index left by one; four rounds swap row and byte.
    for _ in 0..4 {
        let mut y = x;
        for i in 0..8 {
            // SAFETY: SSE2 is part of x86_64.
            unsafe {
                y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
                y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
            }
        }
        x = y;
    }
    x
}

/// Decodes 16 e8m0 codes exactly as `e8m0::decode` (0 is 2^-127, 255 NaN) into `out`.
#[inline]
#[target_feature(enable = "avx2")]
pub fn decode_e8m0_x16(codes: __m128i, out: &mut [f32; 16]) {
    let min = _mm256_set1_epi32(0x0040_0000);
    let nan = _mm256_set1_epi32(0x7FC0_0000);
    let all = _mm256_set1_epi32(0xFF);
    for (h, half) in [codes, _mm_unpackhi_epi64(codes, codes)].into_iter().enumerate() {
        let c = _mm256_cvtepu8_epi32(half);
        let bits = _mm256_max_epi32(_mm256_slli_epi32::<23>(c), min);
        let bits = _mm256_blendv_epi8(bits, nan, _mm256_cmpeq_epi32(c, all));
        // SAFETY: 8 floats fit from offset 8h of a 16-float array.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(8 * h), _mm256_castsi256_ps(bits)) };
    }
}

/// The two bf16 halves of every 32-bit word at `p` as f32 vectors (low half, high half).
#[inline]
#[target_feature(enable = "avx512f")]
pub unsafe fn bf16_pair16(p: *const u16) -> [__m512; 2] {
    // SAFETY: the caller guarantees 32 readable values.
    let d = unsafe { _mm512_loadu_si512(p as *const __m512i) };
    [
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(d)),
        _mm512_castsi512_ps(_mm512_and_si512(d, _mm512_set1_epi32(0xFFFF_0000u32 as i32))),
    ]
}

/// The two bf16 halves of every 32-bit word at `p` as f32 vectors, as `bf16_pair16`.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn bf16_pair8(p: *const u16) -> [__m256; 2] {
    // SAFETY: the caller guarantees 16 readable values.
    let d = unsafe { _mm256_loadu_si256(p as *const __m256i) };
    [
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(d)),
        _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32(0xFFFF_0000u32 as i32))),
    ]
}

/// `reduce_lanes` of one vector: (j, j+8), (j, j+4), (j, j+2), (0, 1).
#[inline]
#[target_feature(enable = "avx512f")]
pub fn hsum16(v: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), hi))
}

/// The last three tree levels of a once-folded vector.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub fn hsum8(h: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps::<1>(d, d)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::reduce_lanes;
    use tensorfold_formats::e8m0;

    fn values(seed: u32, n: usize) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn reduce16_is_sixteen_reduce_lanes() {
        if !is_x86_feature_detected!("avx512f") {
            return;
        }
        let v = values(7, 256);
        let want: Vec<u32> = v
            .chunks(16)
            .map(|c| reduce_lanes(c.try_into().unwrap()).to_bits())
            .collect();
        // SAFETY: avx512f is present, checked above; loads stay inside `v`.
        let got = unsafe { run16(&v) };
        assert_eq!(got.map(f32::to_bits).to_vec(), want);
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn run16(v: &[f32]) -> [f32; 16] {
        // SAFETY: v holds 256 floats.
        let vs: [__m512; 16] = std::array::from_fn(|i| unsafe { _mm512_loadu_ps(v.as_ptr().add(16 * i)) });
        let mut out = [0f32; 16];
        // SAFETY: out holds 16 floats.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), reduce16(vs)) };
        out
    }

    #[test]
    fn reduce4_is_four_reduce_lanes() {
        if !is_x86_feature_detected!("avx512f") {
            return;
        }
        let v = values(5, 64);
        let want: Vec<u32> = v
            .chunks(16)
            .map(|c| reduce_lanes(c.try_into().unwrap()).to_bits())
            .collect();
        // SAFETY: avx512f is present, checked above; loads stay inside `v`.
        let got = unsafe { run4(&v) };
        assert_eq!(got.map(f32::to_bits).to_vec(), want);
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn run4(v: &[f32]) -> [f32; 4] {
        // SAFETY: v holds 64 floats.
        let vs: [__m512; 4] = std::array::from_fn(|i| unsafe { _mm512_loadu_ps(v.as_ptr().add(16 * i)) });
        let mut out = [0f32; 4];
        // SAFETY: out holds 4 floats.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), reduce4(vs)) };
        out
    }

    #[test]
    fn reduce8_is_eight_reduce_lanes() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        let v = values(9, 128);
        let want: Vec<u32> = v
            .chunks(16)
            .map(|c| reduce_lanes(c.try_into().unwrap()).to_bits())
            .collect();
        // SAFETY: avx2 and fma are present, checked above.
        let got = unsafe { run8(&v) };
        assert_eq!(got.map(f32::to_bits).to_vec(), want);
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn run8(v: &[f32]) -> [f32; 8] {
        let t: [__m256; 8] = std::array::from_fn(|i| {
            // SAFETY: v holds 128 floats.
            unsafe {
                _mm256_add_ps(
                    _mm256_loadu_ps(v.as_ptr().add(16 * i)),
                    _mm256_loadu_ps(v.as_ptr().add(16 * i + 8)),
                )
            }
        });
        let mut out = [0f32; 8];
        // SAFETY: out holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), reduce8(t)) };
        out
    }

    #[test]
    fn reduce4x8_is_four_reduce_lanes() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        let v = values(13, 64);
        let want: Vec<u32> = v
            .chunks(16)
            .map(|c| reduce_lanes(c.try_into().unwrap()).to_bits())
            .collect();
        // SAFETY: avx2 and fma are present, checked above.
        let got = unsafe { run4x8(&v) };
        assert_eq!(got.map(f32::to_bits).to_vec(), want);
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn run4x8(v: &[f32]) -> [f32; 4] {
        let t: [__m256; 4] = std::array::from_fn(|i| {
            // SAFETY: v holds 64 floats.
            unsafe {
                _mm256_add_ps(
                    _mm256_loadu_ps(v.as_ptr().add(16 * i)),
                    _mm256_loadu_ps(v.as_ptr().add(16 * i + 8)),
                )
            }
        });
        let mut out = [0f32; 4];
        // SAFETY: out holds 4 floats.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), reduce4x8(t)) };
        out
    }

    #[test]
    fn transpose_and_e8m0_decode() {
        let bytes: Vec<u8> = (0..=255).collect();
        // SAFETY: each load reads 16 of the 256 bytes.
        let rows: [__m128i; 16] =
            std::array::from_fn(|r| unsafe { _mm_loadu_si128(bytes.as_ptr().add(16 * r) as *const __m128i) });
        let t = transpose16(rows);
        for (c, row) in t.iter().enumerate() {
            let mut got = [0u8; 16];
            // SAFETY: got holds 16 bytes.
            unsafe { _mm_storeu_si128(got.as_mut_ptr() as *mut __m128i, *row) };
            let want: Vec<u8> = (0..16).map(|r| (16 * r + c) as u8).collect();
            assert_eq!(got.to_vec(), want);
        }
        if is_x86_feature_detected!("avx2") {
            for row in rows {
                let mut got = [0f32; 16];
                // SAFETY: avx2 is present, checked above.
                unsafe { decode_e8m0_x16(row, &mut got) };
                let mut codes = [0u8; 16];
                // SAFETY: codes holds 16 bytes.
                unsafe { _mm_storeu_si128(codes.as_mut_ptr() as *mut __m128i, row) };
                for (g, c) in got.iter().zip(codes) {
                    assert_eq!(g.to_bits(), e8m0::decode(c).to_bits(), "code {c}");
                }
            }
        }
    }
}
