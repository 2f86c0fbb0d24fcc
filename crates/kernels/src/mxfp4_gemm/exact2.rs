//! Exact MXFP4 GEMV lanes on AVX2: `exact.rs`'s integer lane sums (A = 2^9 a, W = 2w) from byte products with VPMADDUBSW.

use std::arch::x86_64::*;
use std::array::from_fn;

use super::cpu::CHUNK;
use super::exact::{WEIGHT_TABLE, two_digit_shift};
use super::x86::{CHUNK_BYTES, chunk_bytes, nibble8};
use crate::gemm::x86::bf16_pair8;
use crate::gemm::{GROUP, PAIRS};
use tensorfold_formats::e2m1;

/// Largest |A| (A = a * 2^9) of an e4m3 activation; larger or fractional A sends the chunk to the FMA chain.
const MAX_A: i32 = 448 * 512;

/// Largest |A| whose balanced third digit is 0 (A + 0x8080 stays within two bytes).
const MAX_TWO: i32 = 0x7F7F;

/// One chunk's activations as balanced s8 digits (A >> s = d0 + 256 d1 + 65536 d2) and the weight offsets of its lanes and blocks.
#[repr(C, align(32))]
pub(super) struct ChunkDigits {
    /// Plane p, half h, byte 4l + j: digit p of element 8l + 2j + h (the word's nibble 2j + h).
    pub(super) d: [[[i8; 64]; 2]; 3],
    /// Lane l: -12 times the sum of its eight A (the weights enter as W + 12, unsigned).
    pub(super) offset: [i32; 16],
    /// Word 8g + 4b + q: the offset of block 2g + b (its four lanes' offsets), once for each of four columns.
    pub(super) block_offset: [i32; 16],
}

/// Digits of every chunk of one activation row, and which chunks take the integer path and with how many digits.
pub(super) struct Digits {
    pub(super) chunks: Vec<ChunkDigits>,
    pub(super) exact: Vec<bool>,
    pub(super) three: Vec<bool>,
    /// s where the digits are those of A >> s (two-digit chunks whose every A is a multiple of 2^s), else 0.
    pub(super) shift: Vec<i32>,
}

impl Digits {
    /// How many chunks take the integer path.
    pub(super) fn exact_chunks(&self) -> usize {
        self.exact.iter().filter(|&&e| e).count()
    }
}

/// The digits of activation row `a` (decoded bf16 in `LAYOUT` order) over its whole chunks of `chunks`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn digits(a: &[u16], chunks: usize) -> Digits {
    assert!(a.len() >= chunks * CHUNK);
    let mut out = Digits {
        chunks: Vec::with_capacity(chunks),
        exact: Vec::with_capacity(chunks),
        three: Vec::with_capacity(chunks),
        shift: Vec::with_capacity(chunks),
    };
    let (scale, big) = (_mm256_set1_ps(512.0), _mm256_set1_epi32(MAX_A));
    for c in 0..chunks {
        let mut ch = ChunkDigits {
            d: [[[0; 64]; 2]; 3],
            offset: [0; 16],
            block_offset: [0; 16],
        };
        let zero = _mm256_setzero_si256();
        let (mut bad, mut top, mut or) = (zero, zero, zero);
        // Half g, vector q, lane i: A of element 8(8g + i) + q.
        let mut aq = [[zero; 8]; 2];
        for (g, aq) in aq.iter_mut().enumerate() {
            for t in 0..4 {
                // SAFETY: chunk c's 128 values lie inside the row (asserted above).
                let [odd, even] = unsafe { bf16_pair8(a.as_ptr().add(c * CHUNK + 32 * t + 16 * g)) };
                for (q, v) in [(2 * t, even), (2 * t + 1, odd)] {
                    let x = _mm256_mul_ps(v, scale);
                    let i = _mm256_cvtps_epi32(x);
                    let off_grid = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_NEQ_UQ>(_mm256_cvtepi32_ps(i), x));
                    let abs = _mm256_abs_epi32(i);
                    bad = _mm256_or_si256(bad, _mm256_or_si256(off_grid, _mm256_cmpgt_epi32(abs, big)));
                    top = _mm256_max_epu32(top, abs);
                    or = _mm256_or_si256(or, i);
                    aq[q] = i;
                }
            }
        }
        let exact = _mm256_testz_si256(bad, bad) == 1;
        // A two-digit chunk's digits are those of A >> s (exact: every A is a multiple of 2^s).
        let most = hmax_epu32(top);
        let shift = two_digit_shift(most, hor_epi32(or)).filter(|_| exact);
        let s = _mm_cvtsi32_si128(shift.unwrap_or(0) as i32);
        for (g, aq) in aq.iter().enumerate() {
            let aq = aq.map(|v| _mm256_sra_epi32(v, s));
            let sum = aq.iter().fold(zero, |s, &v| _mm256_add_epi32(s, v));
            let offset = _mm256_mullo_epi32(sum, _mm256_set1_epi32(-12));
            // Each 128-bit half's four lanes summed into all four words.
            let pairs = _mm256_add_epi32(offset, _mm256_shuffle_epi32::<0x4E>(offset));
            let blocks = _mm256_add_epi32(pairs, _mm256_shuffle_epi32::<0xB1>(pairs));
            // SAFETY: 8 ints at lane 8g of each.
            unsafe {
                _mm256_storeu_si256(ch.offset.as_mut_ptr().add(8 * g) as *mut __m256i, offset);
                _mm256_storeu_si256(ch.block_offset.as_mut_ptr().add(8 * g) as *mut __m256i, blocks);
            }
            // Byte p of A + 0x808080 is balanced digit p plus 128.
            let biased: [__m256i; 8] = from_fn(|q| _mm256_add_epi32(aq[q], _mm256_set1_epi32(0x80_8080)));
            for (p, plane) in ch.d.iter_mut().enumerate() {
                let at = _mm_cvtsi32_si128(8 * p as i32);
                for (h, half) in plane.iter_mut().enumerate() {
                    let word = (0..4).fold(zero, |w, j| {
                        let byte = _mm256_and_si256(_mm256_srl_epi32(biased[2 * j + h], at), _mm256_set1_epi32(0xFF));
                        _mm256_or_si256(w, _mm256_sll_epi32(byte, _mm_cvtsi32_si128(8 * j as i32)))
                    });
                    let word = _mm256_xor_si256(word, _mm256_set1_epi8(-128));
                    // SAFETY: 32 bytes at lane 8g.
                    unsafe { _mm256_storeu_si256(half.as_mut_ptr().add(32 * g) as *mut __m256i, word) };
                }
            }
        }
        out.exact.push(exact);
        out.three.push(shift.is_none() && most > MAX_TWO as u32);
        out.shift.push(shift.unwrap_or(0) as i32);
        out.chunks.push(ch);
    }
    out
}

/// The bitwise or of eight words.
#[inline]
#[target_feature(enable = "avx2")]
fn hor_epi32(v: __m256i) -> u32 {
    let m = _mm_or_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let m = _mm_or_si128(m, _mm_shuffle_epi32::<0x4E>(m));
    let m = _mm_or_si128(m, _mm_shuffle_epi32::<0xB1>(m));
    _mm_cvtsi128_si32(m) as u32
}

/// The largest of eight unsigned words.
#[inline]
#[target_feature(enable = "avx2")]
fn hmax_epu32(v: __m256i) -> u32 {
    let m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let m = _mm_max_epu32(m, _mm_shuffle_epi32::<0x4E>(m));
    let m = _mm_max_epu32(m, _mm_shuffle_epi32::<0xB1>(m));
    _mm_cvtsi128_si32(m) as u32
}

/// Which VPDPBUSD the AVX2 lanes use: 1 AVX-VNNI's, 2 AVX-512 VNNI's 256-bit form, 0 none (VPMADDUBSW).
pub(super) fn vnni_form() -> u8 {
    if is_x86_feature_detected!("avxvnni") {
        return 1;
    }
    let wide = is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni");
    2 * u8::from(wide)
}

/// One chunk's digit planes and offsets at lane 8g, loaded once for every column: the lanes' for three digits, the blocks' for two.
struct Planes {
    d: [[__m256i; 2]; 3],
    offset: __m256i,
}

/// The digit planes of `ch` at lane 8g (the third only when `THREE`).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn planes<const THREE: bool>(ch: &ChunkDigits, g: usize) -> Planes {
    let load = |p: usize, h: usize| {
        // SAFETY: 32 bytes at lane 8g of plane p, half h.
        unsafe { _mm256_load_si256(ch.d[p][h].as_ptr().add(32 * g) as *const __m256i) }
    };
    let third = if THREE {
        [load(2, 0), load(2, 1)]
    } else {
        [_mm256_setzero_si256(); 2]
    };
    Planes {
        d: [[load(0, 0), load(0, 1)], [load(1, 0), load(1, 1)], third],
        // SAFETY: 8 ints at lane 8g of either.
        offset: unsafe {
            let offset = if THREE { &ch.offset } else { &ch.block_offset };
            _mm256_load_si256(offset.as_ptr().add(8 * g) as *const __m256i)
        },
    }
}

/// Lanes 8g..8g+7 of one row's chunk (`d` its 32 bytes there, `pl` the chunk's planes there): integer sums of A * W (the FMA chain's bits times 2^10), for two digits less the lanes' offsets.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn lanes_int<const THREE: bool>(d: __m256i, pl: &Planes, t: __m256i) -> __m256i {
    let m = _mm256_set1_epi8(0x0F);
    let lo = _mm256_shuffle_epi8(t, _mm256_and_si256(d, m));
    let hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16::<4>(d), m));
    // Pair sums stay within 2 * 24 * 128 and their sum within i16; VPMADDWD then adds each lane's four pairs.
    let plane = |p: usize| {
        _mm256_add_epi16(
            _mm256_maddubs_epi16(lo, pl.d[p][0]),
            _mm256_maddubs_epi16(hi, pl.d[p][1]),
        )
    };
    let mut s = _mm256_add_epi32(
        _mm256_madd_epi16(plane(0), _mm256_set1_epi16(1)),
        _mm256_madd_epi16(plane(1), _mm256_set1_epi16(256)),
    );
    if THREE {
        s = _mm256_add_epi32(s, pl.offset);
        s = _mm256_add_epi32(
            s,
            _mm256_slli_epi32::<16>(_mm256_madd_epi16(plane(2), _mm256_set1_epi16(1))),
        );
    }
    s
}

/// `lanes_int` by VPDPBUSD (`dp`, the form the caller's features allow): each digit plane's four byte products a lane in one add, the same integers.
#[inline(always)]
unsafe fn lanes_dp<const THREE: bool>(
    d: __m256i,
    pl: &Planes,
    t: __m256i,
    dp: impl Fn(__m256i, __m256i, __m256i) -> __m256i,
) -> __m256i {
    // SAFETY: the caller enabled AVX2 and the features `dp` needs.
    unsafe {
        let m = _mm256_set1_epi8(0x0F);
        let lo = _mm256_shuffle_epi8(t, _mm256_and_si256(d, m));
        let hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16::<4>(d), m));
        let plane = |init: __m256i, p: usize| dp(dp(init, lo, pl.d[p][0]), hi, pl.d[p][1]);
        let init = if THREE { pl.offset } else { _mm256_setzero_si256() };
        let mut s = _mm256_add_epi32(plane(init, 0), _mm256_slli_epi32::<8>(plane(_mm256_setzero_si256(), 1)));
        if THREE {
            s = _mm256_add_epi32(s, _mm256_slli_epi32::<16>(plane(_mm256_setzero_si256(), 2)));
        }
        s
    }
}

/// `lanes_dp` by AVX-VNNI's VPDPBUSD.
#[inline]
#[target_feature(enable = "avx2,fma,avxvnni")]
fn lanes_vnni<const THREE: bool>(d: __m256i, pl: &Planes, t: __m256i) -> __m256i {
    // SAFETY: AVX2 and AVX-VNNI are enabled here.
    unsafe { lanes_dp::<THREE>(d, pl, t, |a, b, c| _mm256_dpbusd_avx_epi32(a, b, c)) }
}

/// `lanes_dp` by AVX-512 VNNI's 256-bit VPDPBUSD.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
fn lanes_vnni512<const THREE: bool>(d: __m256i, pl: &Planes, t: __m256i) -> __m256i {
    // SAFETY: AVX2, AVX-512 VL and VNNI are enabled here.
    unsafe { lanes_dp::<THREE>(d, pl, t, |a, b, c| _mm256_dpbusd_epi32(a, b, c)) }
}

/// Integer lanes of chunk c of the 16 rows (digits of A >> shift; by VPDPBUSD when `VNNI` is 1 (AVX-VNNI) or 2 (AVX-512 VNNI), which the caller's features must allow): r[i][g], half b, is block 2g + b of columns 4i..4i + 3.
#[inline(always)]
unsafe fn chunk_int<const THREE: bool, const VNNI: u8>(
    rows: &[&[u8]; PAIRS],
    c: usize,
    ch: &ChunkDigits,
    shift: i32,
    t: __m256i,
    ahead: usize,
) -> [[__m256; 2]; 4] {
    // SAFETY: the caller's features cover AVX2, FMA and, when VNNI, AVX-VNNI; chunk c is whole in every row.
    unsafe {
        for row in rows {
            // A prefetch never faults.
            _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().wrapping_add(c * CHUNK_BYTES + ahead) as *const i8);
        }
        let mut r = [[_mm256_setzero_ps(); 2]; 4];
        // Scaling by 2^(s-10) after the sums is exact: every lane is 0 or an integer (s is 0 to 3, so the power is built from its exponent bits).
        let scale = _mm256_set1_ps(f32::from_bits(((shift + 117) as u32) << 23));
        // The previous group's lanes, its place in r and its planes' offsets: summed after this group's lanes are issued, so the sums' latency hides.
        let mut held = None;
        for g in 0..2 {
            let pl = planes::<THREE>(ch, g);
            for i in 0..4 {
                let mut four = [_mm256_setzero_si256(); 4];
                for (q, f) in four.iter_mut().enumerate() {
                    let p = rows[4 * i + q].as_ptr().wrapping_add(c * CHUNK_BYTES + 32 * g);
                    let d = _mm256_loadu_si256(p as *const __m256i);
                    *f = match VNNI {
                        1 => lanes_vnni::<THREE>(d, &pl, t),
                        2 => lanes_vnni512::<THREE>(d, &pl, t),
                        _ => lanes_int::<THREE>(d, &pl, t),
                    };
                }
                if let Some((lanes, pi, pg, offset)) = held.replace((four, i, g, pl.offset)) {
                    r[pi][pg] = block_sums::<THREE>(lanes, offset, scale);
                }
            }
        }
        if let Some((lanes, pi, pg, offset)) = held {
            r[pi][pg] = block_sums::<THREE>(lanes, offset, scale);
        }
        r
    }
}

/// Block sums of the lanes of four columns, times `scale`: half b, lane q is block b of the halves' pair in column q; two-digit blocks add `offset`, their blocks' offsets.
#[inline(always)]
unsafe fn block_sums<const THREE: bool>(four: [__m256i; 4], offset: __m256i, scale: __m256) -> __m256 {
    // SAFETY: the caller enabled AVX2.
    unsafe {
        // Two digits: each block's sum with its offset lies within 2^24 and every partial within i32, so integer adds give the float adds' bits.
        let blocks = match THREE {
            true => quarters4(four.map(|v| _mm256_cvtepi32_ps(v))),
            false => {
                let sums = quarters4_by(four.map(|v| _mm256_castsi256_ps(v)), |a, b| {
                    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)))
                });
                _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_castps_si256(sums), offset))
            }
        };
        _mm256_mul_ps(blocks, scale)
    }
}

/// Chunk c of the 16 rows by the FMA chain, as `chunk_int`: activations at `a`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn chunk_fma(a: *const u16, rows: &[&[u8]; PAIRS], c: usize, mag: __m256) -> [[__m256; 2]; 4] {
    let mut r = [[_mm256_setzero_ps(); 2]; 4];
    for (i, ri) in r.iter_mut().enumerate() {
        let mut v = [[_mm256_setzero_ps(); 2]; 4];
        for (q, vq) in v.iter_mut().enumerate() {
            // SAFETY: the caller's chunk holds 128 activations at a.
            *vq = unsafe { lanes_fma(a, &chunk_bytes(rows[4 * i + q], c), mag) };
        }
        for (g, rg) in ri.iter_mut().enumerate() {
            *rg = quarters4([v[0][g], v[1][g], v[2][g], v[3][g]]);
        }
    }
    r
}

/// Lanes 0..7 and 8..15 of one row's chunk by the FMA chain (as `pairs_avx2`): activations at `a`, weight bytes `bytes`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn lanes_fma(a: *const u16, bytes: &[u8; CHUNK_BYTES], mag: __m256) -> [__m256; 2] {
    let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    // SAFETY: 64 bytes; the caller's chunk holds 128 values at a.
    unsafe {
        let dl = _mm256_loadu_si256(bytes.as_ptr() as *const __m256i);
        let dh = _mm256_loadu_si256(bytes.as_ptr().add(32) as *const __m256i);
        for t in 0..4 {
            let at = a.add(32 * t);
            let (al, ah) = (bf16_pair8(at), bf16_pair8(at.add(16)));
            for h in 0..2 {
                lo = _mm256_fmadd_ps(al[1 - h], nibble8(dl, 2 * t + h, mag), lo);
                hi = _mm256_fmadd_ps(ah[1 - h], nibble8(dh, 2 * t + h, mag), hi);
            }
        }
    }
    [lo, hi]
}

/// Byte p of each word of `v` (an e8m0 code, not 0 or 255) as its scale, `code << 23`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn plain_scale(v: __m256i, p: usize) -> __m256 {
    let bits = match p {
        0 => _mm256_slli_epi32::<23>(v),
        1 => _mm256_slli_epi32::<15>(v),
        2 => _mm256_slli_epi32::<7>(v),
        _ => _mm256_srli_epi32::<1>(v),
    };
    _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(0x7F80_0000)))
}

/// Block inners of four columns' lane vectors: half b, lane i is (l0 + l2) + (l1 + l3) of `v[i]`'s half b.
#[inline]
#[target_feature(enable = "avx2")]
fn quarters4(v: [__m256; 4]) -> __m256 {
    quarters4_by(v, |a, b| _mm256_add_ps(a, b))
}

/// `quarters4` with `add` for its adds (integer lanes pass an integer add on the same bits).
#[inline]
#[target_feature(enable = "avx2")]
fn quarters4_by(v: [__m256; 4], add: impl Fn(__m256, __m256) -> __m256) -> __m256 {
    let u0 = add(
        _mm256_shuffle_ps::<0x44>(v[0], v[1]),
        _mm256_shuffle_ps::<0xEE>(v[0], v[1]),
    );
    let u1 = add(
        _mm256_shuffle_ps::<0x44>(v[2], v[3]),
        _mm256_shuffle_ps::<0xEE>(v[2], v[3]),
    );
    add(_mm256_shuffle_ps::<0x88>(u0, u1), _mm256_shuffle_ps::<0xDD>(u0, u1))
}

/// An entry of `rows_body::<VNNI>` compiled with `features`, which cover what that body needs.
macro_rules! rows_entry {
    ($(#[$doc:meta])* $name:ident, $features:literal, $vnni:literal) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            a: &[u16],
            sa: &[f32],
            digits: Option<&Digits>,
            swt: &[f32],
            coded: bool,
            rows: &[&[u8]; PAIRS],
            k: usize,
            ahead: usize,
        ) -> [f32; PAIRS] {
            // SAFETY: the features enabled here are the body's.
            unsafe { rows_body::<$vnni>(a, sa, digits, swt, coded, rows, k, ahead) }
        }
    };
}

rows_entry!(
    /// One activation row against the 16 weight rows `rows`: integer lanes on exact chunks, the FMA chain elsewhere; block kb of column j scaled by sa[kb/4] * swt[kb * 16 + j], or when `coded` by the scale of the code in byte kb % 4 of word (kb / 4) * 16 + j (as `plain_codes_avx2` writes them).
    rows_avx2,
    "avx2,fma",
    0
);
rows_entry!(
    /// `rows_avx2` with the integer lanes by VPDPBUSD: the same bits.
    rows_avx2_vnni,
    "avx2,fma,avxvnni",
    1
);
rows_entry!(
    /// `rows_avx2` with the integer lanes by AVX-512 VNNI's 256-bit VPDPBUSD: the same bits.
    rows_avx2_vnni512,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    2
);

/// `rows_avx2`'s body, inlined into callers whose features cover AVX2, FMA and `VNNI`'s (1: AVX-VNNI, 2: AVX-512 VL and VNNI).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn rows_body<const VNNI: u8>(
    a: &[u16],
    sa: &[f32],
    digits: Option<&Digits>,
    swt: &[f32],
    coded: bool,
    rows: &[&[u8]; PAIRS],
    k: usize,
    ahead: usize,
) -> [f32; PAIRS] {
    // SAFETY: the caller enabled AVX2, FMA and `VNNI`'s features; every read is checked or asserted below.
    unsafe {
        let (blocks, chunks, full) = (k / super::cpu::BLOCK, k.div_ceil(CHUNK), k / CHUNK);
        let words = if coded { chunks * GROUP } else { blocks * GROUP };
        assert!(a.len() >= chunks * CHUNK && sa.len() >= chunks && swt.len() >= words);
        assert!(rows.iter().all(|r| r.len() == k / 2) && digits.is_none_or(|d| d.chunks.len() >= full));
        // 32 bytes; 8 floats.
        let (t, mag) = (
            _mm256_loadu_si256(WEIGHT_TABLE.as_ptr() as *const __m256i),
            _mm256_loadu_ps(e2m1::TABLE.as_ptr()),
        );
        // Lane j of acc[h]: column 8h + j.
        let mut acc = [_mm256_setzero_ps(); 2];
        for (c, &sa) in sa.iter().enumerate().take(chunks) {
            // r[i][g], half b: block 2g + b of columns 4i..4i + 3.
            let r = match digits.filter(|d| c < full && d.exact[c]) {
                Some(dg) if dg.three[c] => chunk_int::<true, VNNI>(rows, c, &dg.chunks[c], dg.shift[c], t, ahead),
                Some(dg) => chunk_int::<false, VNNI>(rows, c, &dg.chunks[c], dg.shift[c], t, ahead),
                // Chunk c's 128 activations lie inside the row (asserted on entry).
                None => chunk_fma(a.as_ptr().add(c * CHUNK), rows, c, mag),
            };
            let s = _mm256_set1_ps(sa);
            // Columns 8h..8h + 7's codes of chunk c when coded (swt then holds 16 words a chunk, asserted on entry).
            let codes = match coded {
                true => [0, 8].map(|h| _mm256_loadu_si256(swt.as_ptr().add(c * GROUP + h) as *const __m256i)),
                false => [_mm256_setzero_si256(); 2],
            };
            for (h, acc) in acc.iter_mut().enumerate() {
                for (g, (&r0, &r1)) in r[2 * h].iter().zip(&r[2 * h + 1]).enumerate() {
                    let per_block = [
                        _mm256_permute2f128_ps::<0x20>(r0, r1),
                        _mm256_permute2f128_ps::<0x31>(r0, r1),
                    ];
                    for (b, inner) in per_block.into_iter().enumerate() {
                        let kb = 4 * c + 2 * g + b;
                        if kb < blocks {
                            // Uncoded, swt holds `blocks` rows of 16 (asserted on entry).
                            let sw = match coded {
                                true => plain_scale(codes[h], 2 * g + b),
                                false => _mm256_loadu_ps(swt.as_ptr().add(kb * GROUP + 8 * h)),
                            };
                            *acc = _mm256_fmadd_ps(inner, _mm256_mul_ps(s, sw), *acc);
                        }
                    }
                }
            }
        }
        let mut out = [0f32; PAIRS];
        // 8 floats each.
        _mm256_storeu_ps(out.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(out.as_mut_ptr().add(8), acc[1]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mxfp4_gemm::testdata::{bytes, layout, rounding_lanes};
    use tensorfold_formats::{e4m3, e8m0};

    fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    fn vnni512() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
    }

    /// 16 weight rows against `values` by integer lanes (`force`: on every chunk) and by the FMA chain: (integer bits, FMA bits, exact chunks).
    fn run(values: &[f32], weights: &[u8], force: bool) -> (Vec<u32>, Vec<u32>, usize) {
        let k = values.len();
        let a = layout(values);
        let chunks = k / CHUNK;
        let sa: Vec<f32> = (0..chunks).map(|c| 2f32.powi(c as i32 % 5 - 2)).collect();
        let swt: Vec<f32> = bytes(7, k / 32 * GROUP)
            .iter()
            .map(|&b| e8m0::TABLE[118 + b as usize % 16])
            .collect();
        let rows: [&[u8]; PAIRS] = from_fn(|j| &weights[j * k / 2..][..k / 2]);
        // SAFETY: the callers check `available`.
        unsafe {
            let mut d = digits(&a, chunks);
            let exact = d.exact_chunks();
            if force {
                d.exact.iter_mut().for_each(|e| *e = true);
                d.three.iter_mut().for_each(|t| *t = true);
            }
            let got = rows_avx2(&a, &sa, Some(&d), &swt, false, &rows, k, 1024);
            let want = rows_avx2(&a, &sa, None, &swt, false, &rows, k, 1024);
            if is_x86_feature_detected!("avxvnni") {
                let vnni = rows_avx2_vnni(&a, &sa, Some(&d), &swt, false, &rows, k, 1024);
                assert_eq!(
                    vnni.map(f32::to_bits),
                    got.map(f32::to_bits),
                    "VPDPBUSD lanes against VPMADDUBSW lanes"
                );
                let chain = rows_avx2_vnni(&a, &sa, None, &swt, false, &rows, k, 1024);
                assert_eq!(chain.map(f32::to_bits), want.map(f32::to_bits));
            }
            if vnni512() {
                let vnni = rows_avx2_vnni512(&a, &sa, Some(&d), &swt, false, &rows, k, 1024);
                assert_eq!(
                    vnni.map(f32::to_bits),
                    got.map(f32::to_bits),
                    "AVX-512 VNNI lanes against VPMADDUBSW lanes"
                );
            }
            let bits = |v: [f32; PAIRS]| v.iter().map(|x| x.to_bits()).collect();
            (bits(got), bits(want), exact)
        }
    }

    #[test]
    fn integer_lanes_give_the_fma_bits_on_random_codes() {
        if !available() {
            return;
        }
        let k = 1024;
        for seed in 1..6 {
            let values: Vec<f32> = bytes(seed, k).iter().map(|&c| e4m3::TABLE[c as usize & 0xF7]).collect();
            let w = bytes(seed + 100, PAIRS * k / 2);
            let (got, want, exact) = run(&values, &w, false);
            assert_eq!(
                exact,
                k / CHUNK,
                "seed {seed}: every finite e4m3 chunk takes the integer path"
            );
            assert_eq!(got, want, "seed {seed}");
        }
        // Small codes only: every chunk fits two digits.
        let values: Vec<f32> = bytes(9, k).iter().map(|&c| e4m3::TABLE[(c % 0x50) as usize]).collect();
        let (got, want, _) = run(&values, &bytes(10, PAIRS * k / 2), false);
        assert_eq!(got, want);
    }

    #[test]
    fn shifted_two_digit_chunks_give_the_fma_bits() {
        if !available() {
            return;
        }
        let k = 1024;
        // Exponent fields 4 to 15: every A a multiple of 8, the largest beyond two digits unshifted.
        let code = |c: u8| match (c & 0x87) | (((c >> 3) % 12 + 4) << 3) {
            0x7F | 0xFF => 0x7E,
            code => code,
        };
        let values: Vec<f32> = bytes(21, k).iter().map(|&c| e4m3::TABLE[code(c) as usize]).collect();
        // SAFETY: avx2 and fma were checked above.
        let d = unsafe { digits(&layout(&values), k / CHUNK) };
        assert!(
            d.shift.iter().all(|&s| s == 3) && d.three.iter().all(|&t| !t),
            "{:?}",
            d.shift
        );
        let (got, want, exact) = run(&values, &bytes(22, PAIRS * k / 2), false);
        assert_eq!(exact, k / CHUNK);
        assert_eq!(got, want);
    }

    #[test]
    fn two_digit_blocks_at_their_largest_sums_give_the_fma_bits() {
        if !available() {
            return;
        }
        // Every activation 60 (the largest e4m3 below 2^15 / 512) and every weight +-6: lanes and blocks at their widest two-digit sums.
        let k = 512;
        let values = vec![60.0f32; k];
        for byte in [0x77u8, 0xFF, 0x7F] {
            let (got, want, exact) = run(&values, &vec![byte; PAIRS * k / 2], false);
            assert_eq!(exact, k / CHUNK);
            assert_eq!(got, want, "weight byte {byte:#x}");
        }
        // SAFETY: avx2 and fma were checked above.
        let d = unsafe { digits(&layout(&values), k / CHUNK) };
        assert!(d.three.iter().all(|&t| !t), "60 fits two digits");
    }

    #[test]
    fn lanes_that_round_at_their_last_step_agree() {
        if !available() {
            return;
        }
        let k = 512;
        let (values, w) = rounding_lanes(k);
        let (got, want, exact) = run(&values, &w, false);
        assert_eq!(exact, k / CHUNK);
        assert_eq!(got, want);
    }

    #[test]
    fn chunks_off_the_e4m3_grid_take_the_fma_chain() {
        if !available() {
            return;
        }
        // Lane 0 of chunk 1: 3072 * 6 then seven 2^-10 products, which the chain drops one by one and one rounding keeps.
        let k = 256;
        let mut values: Vec<f32> = bytes(11, k).iter().map(|&c| e4m3::TABLE[c as usize & 0x37]).collect();
        values[CHUNK] = 3072.0;
        values[CHUNK + 1..CHUNK + 8].fill(2f32.powi(-9));
        let mut w = bytes(12, PAIRS * k / 2);
        for row in 0..PAIRS {
            w[row * k / 2 + CHUNK / 2..][..4].copy_from_slice(&[0x17, 0x11, 0x11, 0x11]);
        }
        let (got, want, exact) = run(&values, &w, false);
        assert_eq!(exact, 1, "the chunk holding 3072 must leave the integer path");
        assert_eq!(got, want);
        let (forced, want, _) = run(&values, &w, true);
        assert_ne!(
            forced, want,
            "forced through integer lanes the chunk rounds once, so the guard matters"
        );
        // A NaN activation also leaves the integer path.
        values[CHUNK] = f32::NAN;
        let (got, want, exact) = run(&values, &w, false);
        assert_eq!(exact, 1);
        assert_eq!(got, want);
    }
}
