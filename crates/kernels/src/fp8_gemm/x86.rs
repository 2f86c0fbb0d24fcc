//! AVX-512 and AVX2 paths of `fp8_gemm`: weights decoded inside 32-bit lanes (shifts and a mask), lane l = bytes 4l..4l+3.

use std::arch::x86_64::*;
use std::array::from_fn;

use super::cpu::BLOCK;
use crate::gemm::x86::{bf16_pair8, bf16_pair16, hsum8, reduce4, reduce8, reduce16};
use crate::gemm::{GROUP, PAIRS};

/// Sign and the 7 exponent-mantissa bits of an e4m3 code placed at f32 bits 31 and 20..26.
const E4M3_BITS: i32 = super::cpu::E4M3_BITS as i32;

/// Byte `P` of every 32-bit lane as e4m3 * 2^-120: the byte moved to the top, shifted down 4 arithmetically, masked.
#[inline]
#[target_feature(enable = "avx512f")]
fn byte16<const P: u32>(d: __m512i) -> __m512 {
    let top = match P {
        3 => d,
        2 => _mm512_slli_epi32::<8>(d),
        1 => _mm512_slli_epi32::<16>(d),
        _ => _mm512_slli_epi32::<24>(d),
    };
    _mm512_castsi512_ps(_mm512_and_si512(
        _mm512_srai_epi32::<4>(top),
        _mm512_set1_epi32(E4M3_BITS),
    ))
}

/// The 16-lane vectors of one block for every pair (lane l: elements 4l..4l+3, then 64+4l..64+4l+3).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn lanes16<const MR: usize, const NR: usize>(a: &[*const u16; MR], w: &[*const u8; NR]) -> [__m512; 16] {
    let mut lanes = [_mm512_setzero_ps(); 16];
    for ci in 0..NR {
        let mut l = [_mm512_setzero_ps(); MR];
        for chunk in 0..2 {
            // SAFETY: every weight pointer has a whole block (128 bytes) behind it.
            let d = unsafe { _mm512_loadu_si512(w[ci].add(64 * chunk) as *const __m512i) };
            let wv = [byte16::<0>(d), byte16::<1>(d), byte16::<2>(d), byte16::<3>(d)];
            for ri in 0..MR {
                // SAFETY: every activation pointer has a whole block (128 values) behind it.
                let [a1, a0] = unsafe { bf16_pair16(a[ri].add(64 * chunk)) };
                let [a3, a2] = unsafe { bf16_pair16(a[ri].add(64 * chunk + 32)) };
                l[ri] = _mm512_fmadd_ps(a0, wv[0], l[ri]);
                l[ri] = _mm512_fmadd_ps(a1, wv[1], l[ri]);
                l[ri] = _mm512_fmadd_ps(a2, wv[2], l[ri]);
                l[ri] = _mm512_fmadd_ps(a3, wv[3], l[ri]);
            }
        }
        for ri in 0..MR {
            lanes[ri * NR + ci] = l[ri];
        }
    }
    lanes
}

/// MR x NR = 16 pairs; `w` rows hold `k` bytes, `a` rows whole blocks, `panel` one 16-pair vector per block.
#[target_feature(enable = "avx512f")]
pub unsafe fn tile_avx512<const MR: usize, const NR: usize>(
    a: [&[u16]; MR],
    w: [&[u8]; NR],
    k: usize,
    panel: &[f32],
) -> [f32; PAIRS] {
    let (full, tail) = (k / BLOCK, k % BLOCK);
    let blocks = k.div_ceil(BLOCK);
    assert!(panel.len() >= blocks * PAIRS && a.iter().all(|r| r.len() >= blocks * BLOCK));
    let mut acc = _mm512_setzero_ps();
    for kb in 0..full {
        // SAFETY: block kb lies inside every activation and weight row; the panel holds `blocks` vectors.
        unsafe {
            let mut ab = [a[0].as_ptr(); MR];
            for (p, r) in ab.iter_mut().zip(&a) {
                *p = r.as_ptr().add(kb * BLOCK);
            }
            let mut wb = [w[0].as_ptr(); NR];
            for (p, r) in wb.iter_mut().zip(&w) {
                *p = r.as_ptr().add(kb * BLOCK);
            }
            let inner = reduce16(lanes16::<MR, NR>(&ab, &wb));
            acc = _mm512_fmadd_ps(inner, _mm512_loadu_ps(panel.as_ptr().add(kb * PAIRS)), acc);
        }
    }
    if tail > 0 {
        // SAFETY: as above, for the last block.
        acc = unsafe { tail_avx512::<MR, NR>(&a, &w, full, panel, acc) };
    }
    let mut out = [0f32; PAIRS];
    // SAFETY: out holds 16 floats.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
    out
}

/// The ragged last block from zero-padded copies of the weight tails.
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn tail_avx512<const MR: usize, const NR: usize>(
    a: &[&[u16]; MR],
    w: &[&[u8]; NR],
    kb: usize,
    panel: &[f32],
    acc: __m512,
) -> __m512 {
    let mut pad = [[0u8; BLOCK]; NR];
    for (p, r) in pad.iter_mut().zip(w) {
        p[..r.len() - kb * BLOCK].copy_from_slice(&r[kb * BLOCK..]);
    }
    // SAFETY: the caller guarantees block kb of every activation row and of the panel.
    unsafe {
        let ab = from_fn(|ri| a[ri].as_ptr().add(kb * BLOCK));
        let wb = from_fn(|ci| pad[ci].as_ptr());
        let inner = reduce16(lanes16::<MR, NR>(&ab, &wb));
        _mm512_fmadd_ps(inner, _mm512_loadu_ps(panel.as_ptr().add(kb * PAIRS)), acc)
    }
}

/// Bytes ahead of the current block that the one-row path asks the cache for.
/// Block `kb` of four weight rows: whole blocks in place, the last one through the zero-padded `pad`.
#[inline(always)]
pub(super) fn block_ptrs(
    rows: &[&[u8]; 4],
    kb: usize,
    full: usize,
    k: usize,
    pad: &mut [[u8; BLOCK]; 4],
) -> [*const u8; 4] {
    if kb < full {
        from_fn(|j| rows[j].as_ptr().wrapping_add(kb * BLOCK))
    } else {
        for (p, r) in pad.iter_mut().zip(rows) {
            p[..k - full * BLOCK].copy_from_slice(&r[full * BLOCK..]);
        }
        from_fn(|j| pad[j].as_ptr())
    }
}

pub(super) const PREFETCH: usize = 1024;

/// Asks L1 for the two cache lines at `p` (any address: a prefetch never faults).
#[inline(always)]
pub(super) fn prefetch(p: *const u8) {
    prefetch_as::<_MM_HINT_T0>(p);
}

/// Asks L2 (not L1) for the two cache lines at `p`, as `prefetch`.
#[inline(always)]
pub(super) fn prefetch_l2(p: *const u8) {
    prefetch_as::<_MM_HINT_T1>(p);
}

/// The two cache lines at `p` with the cache-level hint `HINT`.
#[inline(always)]
fn prefetch_as<const HINT: i32>(p: *const u8) {
    // SAFETY: SSE is part of x86_64 and a prefetch has no architectural effect.
    unsafe {
        _mm_prefetch::<HINT>(p as *const i8);
        _mm_prefetch::<HINT>(p.wrapping_add(64) as *const i8);
    }
}

/// The scales of a one-row tile: column j's block kb is scaled by `sa[kb] * swt[kb * GROUP + off + j]`.
pub struct RowScales<'a> {
    pub sa: &'a [f32],
    pub swt: &'a [f32],
    pub off: usize,
}

impl RowScales<'_> {
    #[inline(always)]
    pub(super) fn at(&self, kb: usize, j: usize) -> f32 {
        self.sa[kb] * self.swt[kb * GROUP + self.off + j]
    }
}

/// Rows at most this long are prefetched four at a time in address order, longer ones row by row.
const SHORT_ROW: usize = 1024;

/// The four vectors of `byte16` for 64 codes, from two 16-bit arithmetic shifts that put a word's top byte at bits 4..11, as `bytes4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn bytes16(d: __m512i) -> [__m512; 4] {
    let bits = _mm512_set1_epi32(E4M3_BITS);
    let odd = _mm512_srai_epi16::<4>(d);
    let even = _mm512_srai_epi16::<4>(_mm512_slli_epi16::<8>(d));
    let f = |x: __m512i| _mm512_castsi512_ps(_mm512_and_si512(x, bits));
    [
        f(_mm512_slli_epi32::<16>(even)),
        f(_mm512_slli_epi32::<16>(odd)),
        f(even),
        f(odd),
    ]
}

/// A block's eight activation vectors in the order `block4` uses them: 4 chunk + p.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn block_acts(a: *const u16) -> [__m512; 8] {
    // SAFETY: the caller guarantees a whole block (128 values) at `a`.
    let [[a1, a0], [a3, a2], [b1, b0], [b3, b2]] = unsafe { [0, 32, 64, 96].map(|o| bf16_pair16(a.add(o))) };
    [a0, a1, a2, a3, b0, b1, b2, b3]
}

/// One block's lane vectors for four weight rows against one activation row (`act` from `block_acts`), as `lanes16` per row.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn block4(act: &[__m512; 8], w: &[*const u8; 4]) -> [__m512; 4] {
    let mut l = [_mm512_setzero_ps(); 4];
    for chunk in 0..2 {
        for (l, w) in l.iter_mut().zip(w) {
            // SAFETY: the caller guarantees a whole block (128 bytes) behind every pointer.
            let d = unsafe { _mm512_loadu_si512(w.add(64 * chunk) as *const __m512i) };
            for (p, wv) in bytes16(d).into_iter().enumerate() {
                *l = _mm512_fmadd_ps(act[4 * chunk + p], wv, *l);
            }
        }
    }
    l
}

/// One activation row against each of `w`, four weight rows streamed at a time (the decode GEMV path), as `lanes16` and `hsum16` per pair.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn rows_avx512(a: &[u16], w: &[&[u8]], k: usize, scales: &RowScales) -> [f32; PAIRS] {
    let (full, blocks) = (k / BLOCK, k.div_ceil(BLOCK));
    assert!(a.len() >= blocks * BLOCK && !w.is_empty() && w.len() <= PAIRS);
    assert!(scales.sa.len() >= blocks && scales.swt.len() >= blocks * GROUP);
    assert!(scales.off + w.len().next_multiple_of(4) <= GROUP);
    assert!(w.iter().all(|r| r.len() == k));
    let mut out = [0f32; PAIRS];
    for g in (0..w.len()).step_by(4) {
        let rows: [&[u8]; 4] = from_fn(|j| w[(g + j).min(w.len() - 1)]);
        let mut acc = _mm_setzero_ps();
        let mut pad = [[0u8; BLOCK]; 4];
        for kb in 0..blocks {
            let wb = block_ptrs(&rows, kb, full, k, &mut pad);
            if k <= SHORT_ROW {
                // Short rows: the next four rows (contiguous after these) in address order, 512 bytes a block.
                let next = rows[0].as_ptr().wrapping_add(4 * k + 4 * BLOCK * kb);
                for line in 0..4 {
                    prefetch(next.wrapping_add(2 * 64 * line));
                }
            } else {
                for p in wb {
                    // The same block of the next four rows.
                    prefetch(p.wrapping_add(4 * k));
                }
            }
            // SAFETY: block kb of the activations exists; every weight pointer has a whole (or padded) block.
            let inner = reduce4(unsafe { block4(&block_acts(a.as_ptr().add(kb * BLOCK)), &wb) });
            // SAFETY: swt holds `blocks` rows of 16 scales; off + g + 4 <= 16, asserted above.
            let sw = unsafe { _mm_loadu_ps(scales.swt.as_ptr().add(kb * GROUP + scales.off + g)) };
            acc = _mm_fmadd_ps(inner, _mm_mul_ps(_mm_set1_ps(scales.sa[kb]), sw), acc);
        }
        let mut four = [0f32; 4];
        // SAFETY: four floats.
        unsafe { _mm_storeu_ps(four.as_mut_ptr(), acc) };
        let n = (w.len() - g).min(4);
        out[g..g + n].copy_from_slice(&four[..n]);
    }
    out
}

/// One activation row against each of `w` in turn, as `rows_avx512`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn rows_avx2(a: &[u16], w: &[&[u8]], k: usize, scales: &RowScales) -> [f32; PAIRS] {
    let (full, blocks) = (k / BLOCK, k.div_ceil(BLOCK));
    assert!(a.len() >= blocks * BLOCK && w.len() <= PAIRS);
    assert!(scales.sa.len() >= blocks && scales.swt.len() >= blocks * GROUP && scales.off + w.len() <= GROUP);
    assert!(w.iter().all(|r| r.len() == k));
    let mut out = [0f32; PAIRS];
    for (ci, r) in w.iter().enumerate() {
        let mut acc = 0f32;
        let (ap, wp) = (a.as_ptr(), r.as_ptr());
        for kb in 0..full {
            prefetch(wp.wrapping_add(kb * BLOCK + PREFETCH));
            // SAFETY: as in `rows_avx512`.
            unsafe {
                let t = lanes8::<1, 1>(&[ap.add(kb * BLOCK)], &[wp.add(kb * BLOCK)]);
                acc = hsum8(t[0]).mul_add(scales.at(kb, ci), acc);
            }
        }
        if full < blocks {
            let mut pad = [0u8; BLOCK];
            pad[..k - full * BLOCK].copy_from_slice(&r[full * BLOCK..]);
            // SAFETY: as in `rows_avx512`.
            let t = unsafe { lanes8::<1, 1>(&[ap.add(full * BLOCK)], &[pad.as_ptr()]) };
            acc = hsum8(t[0]).mul_add(scales.at(full, ci), acc);
        }
        out[ci] = acc;
    }
    out
}

/// Byte P = 0..4 of every 32-bit lane as e4m3 * 2^-120 (as `byte16`), from two 16-bit arithmetic shifts that put a word's top byte at bits 4..11.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn bytes4(d: __m256i) -> [__m256; 4] {
    let bits = _mm256_set1_epi32(E4M3_BITS);
    let odd = _mm256_srai_epi16::<4>(d);
    let even = _mm256_srai_epi16::<4>(_mm256_slli_epi16::<8>(d));
    let f = |x: __m256i| _mm256_castsi256_ps(_mm256_and_si256(x, bits));
    [
        f(_mm256_slli_epi32::<16>(even)),
        f(_mm256_slli_epi32::<16>(odd)),
        f(even),
        f(odd),
    ]
}

/// The once-folded lane vectors (lane j + lane j + 8) of one block for every pair; lanes 8..16 read each load's second half.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn lanes8<const MR: usize, const NR: usize>(a: &[*const u16; MR], w: &[*const u8; NR]) -> [__m256; 8] {
    let mut t = [_mm256_setzero_ps(); 8];
    for ci in 0..NR {
        let mut lo = [_mm256_setzero_ps(); MR];
        let mut hi = [_mm256_setzero_ps(); MR];
        for chunk in 0..2 {
            // SAFETY: whole blocks behind every pointer, as in `lanes16`.
            unsafe {
                let dl = _mm256_loadu_si256(w[ci].add(64 * chunk) as *const __m256i);
                let dh = _mm256_loadu_si256(w[ci].add(64 * chunk + 32) as *const __m256i);
                let (wl, wh) = (bytes4(dl), bytes4(dh));
                for ri in 0..MR {
                    let at = a[ri].add(64 * chunk);
                    let [l1, l0] = bf16_pair8(at);
                    let [h1, h0] = bf16_pair8(at.add(16));
                    let [l3, l2] = bf16_pair8(at.add(32));
                    let [h3, h2] = bf16_pair8(at.add(48));
                    for (p, (al, ah)) in [(l0, h0), (l1, h1), (l2, h2), (l3, h3)].into_iter().enumerate() {
                        lo[ri] = _mm256_fmadd_ps(al, wl[p], lo[ri]);
                        hi[ri] = _mm256_fmadd_ps(ah, wh[p], hi[ri]);
                    }
                }
            }
        }
        for ri in 0..MR {
            t[ri * NR + ci] = _mm256_add_ps(lo[ri], hi[ri]);
        }
    }
    t
}

/// MR x NR = 8 pairs, as `tile_avx512`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn tile_avx2<const MR: usize, const NR: usize>(
    a: [&[u16]; MR],
    w: [&[u8]; NR],
    k: usize,
    panel: &[f32],
) -> [f32; PAIRS] {
    let (full, tail) = (k / BLOCK, k % BLOCK);
    let blocks = k.div_ceil(BLOCK);
    assert!(panel.len() >= blocks * PAIRS && a.iter().all(|r| r.len() >= blocks * BLOCK));
    let mut acc = _mm256_setzero_ps();
    let mut pad = [[0u8; BLOCK]; NR];
    if tail > 0 {
        for (p, r) in pad.iter_mut().zip(&w) {
            p[..tail].copy_from_slice(&r[full * BLOCK..]);
        }
    }
    for kb in 0..blocks {
        // SAFETY: block kb lies inside every activation row; weight blocks are whole or padded copies.
        unsafe {
            let mut ab = [a[0].as_ptr(); MR];
            for (p, r) in ab.iter_mut().zip(&a) {
                *p = r.as_ptr().add(kb * BLOCK);
            }
            let mut wb = [w[0].as_ptr(); NR];
            for ((p, r), pad) in wb.iter_mut().zip(&w).zip(&pad) {
                *p = if kb < full {
                    r.as_ptr().add(kb * BLOCK)
                } else {
                    pad.as_ptr()
                };
            }
            let inner = reduce8(lanes8::<MR, NR>(&ab, &wb));
            acc = _mm256_fmadd_ps(inner, _mm256_loadu_ps(panel.as_ptr().add(kb * PAIRS)), acc);
        }
    }
    let mut out = [0f32; PAIRS];
    // SAFETY: out holds 16 floats.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference decode: byte `P` moved to the top by a 32-bit shift, then shifted down 4 arithmetically.
    #[target_feature(enable = "avx2,fma")]
    fn byte8<const P: u32>(d: __m256i) -> __m256 {
        let top = match P {
            3 => d,
            2 => _mm256_slli_epi32::<8>(d),
            1 => _mm256_slli_epi32::<16>(d),
            _ => _mm256_slli_epi32::<24>(d),
        };
        _mm256_castsi256_ps(_mm256_and_si256(
            _mm256_srai_epi32::<4>(top),
            _mm256_set1_epi32(E4M3_BITS),
        ))
    }

    #[target_feature(enable = "avx2,fma")]
    fn both(d: __m256i) -> ([__m256; 4], [__m256; 4]) {
        (bytes4(d), [byte8::<0>(d), byte8::<1>(d), byte8::<2>(d), byte8::<3>(d)])
    }

    #[test]
    fn two_shift_decode_is_the_byte_decode_for_every_code_in_every_position() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        for base in (0..256).step_by(32) {
            // Lane l holds codes base + l + 8p at byte p, so every code sits in every position once over the loop.
            let bytes: [u8; 32] = from_fn(|i| (base + i % 4 * 8 + i / 4) as u8);
            let bytes: [u8; 32] = from_fn(|i| bytes[i].wrapping_add((i % 4 * 64) as u8));
            // SAFETY: 32 bytes; avx2 and fma are present, checked above.
            let (got, want) = unsafe { both(_mm256_loadu_si256(bytes.as_ptr() as *const __m256i)) };
            for p in 0..4 {
                let bits = |v: __m256| -> [u32; 8] {
                    let mut o = [0f32; 8];
                    // SAFETY: 8 floats.
                    unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
                    o.map(f32::to_bits)
                };
                assert_eq!(bits(got[p]), bits(want[p]), "base {base} byte {p}");
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    fn both16(d: __m512i) -> ([__m512; 4], [__m512; 4]) {
        (
            bytes16(d),
            [byte16::<0>(d), byte16::<1>(d), byte16::<2>(d), byte16::<3>(d)],
        )
    }

    #[test]
    fn avx512_word_shift_decode_is_the_byte_decode_for_every_code_in_every_position() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
            eprintln!("skipped: this CPU has no AVX-512 BW");
            return;
        }
        for base in (0..256).step_by(64) {
            // Lane l holds code base + l + 80p at byte p, so every code sits in every position once over the loop.
            let bytes: [u8; 64] = from_fn(|i| (base + i / 4 + i % 4 * 80) as u8);
            // SAFETY: 64 bytes; avx512f and avx512bw are present, checked above.
            let (got, want) = unsafe { both16(_mm512_loadu_si512(bytes.as_ptr() as *const __m512i)) };
            let bits = |v: __m512| -> [u32; 16] {
                let mut o = [0f32; 16];
                // SAFETY: 16 floats.
                unsafe { _mm512_storeu_ps(o.as_mut_ptr(), v) };
                o.map(f32::to_bits)
            };
            for p in 0..4 {
                assert_eq!(bits(got[p]), bits(want[p]), "base {base} byte {p}");
            }
        }
    }
}
