//! AVX-512-BF16 path of `fp8_gemm`: codes become bf16 through 128-entry byte tables, and VDPBF16PS sums each word pair high half first.

use std::arch::x86_64::*;
use std::mem::transmute;

use super::cpu::BLOCK;
use super::x86::{PREFETCH, RowScales, prefetch};
use crate::gemm::x86::hsum16;
use crate::gemm::{GROUP, PAIRS};

/// Weights decode to e4m3 * 2^-117 (a normal bf16 even for e4m3 subnormals), 8 times the f32 paths' 2^-120; inners are scaled back.
pub(super) const UNDO: f32 = 0.125;

/// The bf16 bits of e4m3 magnitude `m` times 2^-117 (the NaN code as 480, like `decode_e4m3`); `flush` keeps subnormals denormal.
const fn bf16_bits(m: u8, flush: bool) -> u16 {
    let (e, mant) = ((m >> 3) as u16, (m & 7) as u16);
    if e > 0 {
        (e + 3) << 7 | mant << 4
    } else if mant == 0 || flush {
        mant << 4
    } else {
        // mant * 2^-126: exponent field top + 1, the bits below the top one as the fraction.
        let top = 15 - mant.leading_zeros() as u16;
        (top + 1) << 7 | (mant ^ (1 << top)) << (7 - top)
    }
}

/// Byte `hi` of `bf16_bits` for every 7-bit magnitude.
const fn table(hi: bool, flush: bool) -> [u8; 128] {
    let mut t = [0u8; 128];
    let mut m = 0;
    while m < 128 {
        let b = bf16_bits(m as u8, flush);
        t[m] = if hi { (b >> 8) as u8 } else { b as u8 };
        m += 1;
    }
    t
}

/// `vpermi2b` indices from (low bytes, high bytes) to words: dword l holds codes (4l + 2h + 1, 4l + 2h) as (low, high) half.
const fn interleave(h: usize) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut l = 0;
    while l < 16 {
        let c = (4 * l + 2 * h) as u8;
        t[4 * l] = c + 1;
        t[4 * l + 1] = 64 + c + 1;
        t[4 * l + 2] = c;
        t[4 * l + 3] = 64 + c;
        l += 1;
    }
    t
}

static LO: [u8; 128] = table(false, false);
static HI: [u8; 128] = table(true, false);
static LO_FLUSH: [u8; 128] = table(false, true);
static HI_FLUSH: [u8; 128] = table(true, true);
static PAIR: [[u8; 64]; 2] = [interleave(0), interleave(1)];

/// The decode tables in registers.
pub(super) struct Tables {
    pub(super) lo: [__m512i; 2],
    pub(super) hi: [__m512i; 2],
    pub(super) sign: __m512i,
    pair: [__m512i; 2],
}

impl Tables {
    /// The tables; `flush` plants the classic bug (e4m3 subnormals as bf16 denormals, which VDPBF16PS reads as zero).
    #[target_feature(enable = "avx512f")]
    pub(super) fn new(flush: bool) -> Tables {
        let (lo, hi) = if flush { (&LO_FLUSH, &HI_FLUSH) } else { (&LO, &HI) };
        // SAFETY: every load reads 64 bytes of a 64- or 128-byte static.
        let at = |t: &[u8], i: usize| unsafe { _mm512_loadu_si512(t.as_ptr().add(64 * i) as *const __m512i) };
        Tables {
            lo: [at(lo, 0), at(lo, 1)],
            hi: [at(hi, 0), at(hi, 1)],
            sign: _mm512_set1_epi8(i8::MIN),
            pair: [at(&PAIR[0], 0), at(&PAIR[1], 0)],
        }
    }
}

/// 64 codes as two bf16 vectors: dword l of vector h holds codes 4l + 2h (high half) and 4l + 2h + 1 (low half).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) fn decode64(d: __m512i, t: &Tables) -> [__m512i; 2] {
    let lo = _mm512_permutex2var_epi8(t.lo[0], d, t.lo[1]);
    let hi = _mm512_permutex2var_epi8(t.hi[0], d, t.hi[1]);
    // hi | (d & sign): the code's sign is the bf16's.
    let hi = _mm512_ternarylogic_epi32::<0xF8>(hi, d, t.sign);
    [
        _mm512_permutex2var_epi8(lo, t.pair[0], hi),
        _mm512_permutex2var_epi8(lo, t.pair[1], hi),
    ]
}

/// One block's 16 lanes (lane l: elements 4l..4l+3, then 64+4l..64+4l+3, in order), 8 times the f32 paths' lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
pub(super) unsafe fn block_lanes(a: *const u16, w: *const u8, t: &Tables) -> __m512 {
    let mut acc = _mm512_setzero_ps();
    for chunk in 0..2 {
        // SAFETY: the caller guarantees a whole block of weights and activations.
        let (d, a0, a1) = unsafe {
            (
                _mm512_loadu_si512(w.add(64 * chunk) as *const __m512i),
                _mm512_loadu_si512(a.add(64 * chunk) as *const __m512i),
                _mm512_loadu_si512(a.add(64 * chunk + 32) as *const __m512i),
            )
        };
        let [w0, w1] = decode64(d, t);
        // SAFETY: same-sized vector types; the bits are bf16 pairs.
        unsafe {
            acc = _mm512_dpbf16_ps(
                acc,
                transmute::<__m512i, __m512bh>(a0),
                transmute::<__m512i, __m512bh>(w0),
            );
            acc = _mm512_dpbf16_ps(
                acc,
                transmute::<__m512i, __m512bh>(a1),
                transmute::<__m512i, __m512bh>(w1),
            );
        }
    }
    acc
}

/// One activation row against each of `w` in turn, bit-equal to `x86::rows_avx512`; `flush` plants the denormal-table bug.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
pub unsafe fn rows(a: &[u16], w: &[&[u8]], k: usize, scales: &RowScales, flush: bool) -> [f32; PAIRS] {
    let (full, blocks) = (k / BLOCK, k.div_ceil(BLOCK));
    assert!(a.len() >= blocks * BLOCK && w.len() <= PAIRS);
    assert!(scales.sa.len() >= blocks && scales.swt.len() >= blocks * GROUP && scales.off + w.len() <= GROUP);
    assert!(w.iter().all(|r| r.len() == k));
    let t = Tables::new(flush);
    let mut out = [0f32; PAIRS];
    for (ci, r) in w.iter().enumerate() {
        let mut acc = 0f32;
        let (ap, wp) = (a.as_ptr(), r.as_ptr());
        for kb in 0..full {
            prefetch(wp.wrapping_add(kb * BLOCK + PREFETCH));
            // SAFETY: kb < full: a whole block of activations and weights behind the pointers.
            let lanes = unsafe { block_lanes(ap.add(kb * BLOCK), wp.add(kb * BLOCK), &t) };
            acc = (hsum16(lanes) * UNDO).mul_add(scales.at(kb, ci), acc);
        }
        if full < blocks {
            let mut pad = [0u8; BLOCK];
            pad[..k - full * BLOCK].copy_from_slice(&r[full * BLOCK..]);
            // SAFETY: the last activation block exists; the weights are the padded copy.
            let lanes = unsafe { block_lanes(ap.add(full * BLOCK), pad.as_ptr(), &t) };
            acc = (hsum16(lanes) * UNDO).mul_add(scales.at(full, ci), acc);
        }
        out[ci] = acc;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp8_gemm::cpu::decode_e4m3;

    #[test]
    fn tables_are_eight_times_the_f32_decode_and_normal() {
        for m in 0..128u8 {
            let bits = bf16_bits(m, false);
            let v = f32::from_bits((bits as u32) << 16);
            assert_eq!(v, decode_e4m3(m) * 8.0, "code {m:#x}");
            assert!(m == 0 || v.is_normal(), "code {m:#x} is not a normal bf16");
        }
        assert_eq!(
            bf16_bits(1, true) >> 7,
            0,
            "the planted table keeps subnormals denormal"
        );
    }
}
