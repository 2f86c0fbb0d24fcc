//! AVX-512-BF16 path of `mxfp4_gemm`: nibbles picked by `vpmultishiftqb`, decoded by `vpermw`, summed by VDPBF16PS high half first.

use std::arch::x86_64::*;
use std::mem::transmute;

use tensorfold_formats::e2m1;

use super::cpu::{BLOCK, CHUNK};
use super::x86::{CHUNK_BYTES, chunk_bytes, quarters4};
use crate::gemm::{GROUP, PAIRS};

/// `vpmultishiftqb` controls of step `s`: dword l's low word starts at nibble 2s + 1 of that dword, its high word at nibble 2s.
const fn picks(s: usize, swap: bool) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        let nibble = if (b % 4 < 2) != swap { 2 * s + 1 } else { 2 * s };
        t[b] = (32 * (b / 4 % 2) + 4 * nibble) as u8;
        b += 1;
    }
    t
}

/// The bf16 bits of every e2m1 code, twice: `vpermw` reads 5 index bits and the fifth is the next nibble's.
const fn words() -> [u16; 32] {
    let mut t = [0u16; 32];
    let mut i = 0;
    while i < 32 {
        t[i] = (e2m1::TABLE[i % 16].to_bits() >> 16) as u16;
        i += 1;
    }
    t
}

static PICKS: [[u8; 64]; 4] = [picks(0, false), picks(1, false), picks(2, false), picks(3, false)];
static PICKS_SWAPPED: [[u8; 64]; 4] = [picks(0, true), picks(1, true), picks(2, true), picks(3, true)];
static WORDS: [u16; 32] = words();

/// The decode table and the four steps' nibble picks in registers.
struct Tables {
    words: __m512i,
    picks: [__m512i; 4],
}

impl Tables {
    /// The tables; `swap` plants the classic bug of the layout (each word pair's halves read the wrong way round).
    #[target_feature(enable = "avx512f")]
    fn new(swap: bool) -> Tables {
        let rows = if swap { &PICKS_SWAPPED } else { &PICKS };
        // SAFETY: each load reads one 64-byte static row.
        let picks = [0, 1, 2, 3].map(|s| unsafe { _mm512_loadu_si512(rows[s].as_ptr() as *const __m512i) });
        Tables {
            // SAFETY: 32 words are 64 bytes.
            words: unsafe { _mm512_loadu_si512(WORDS.as_ptr() as *const __m512i) },
            picks,
        }
    }
}

/// One chunk's 16 lanes: lane l sums elements 8l..8l+7 in order (step s: the pair 8l + 2s, 8l + 2s + 1), as `x86::chunk16`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
unsafe fn chunk_lanes(a: *const u16, d: __m512i, t: &Tables) -> __m512 {
    let mut acc = _mm512_setzero_ps();
    for s in 0..4 {
        let w = _mm512_permutexvar_epi16(_mm512_multishift_epi64_epi8(t.picks[s], d), t.words);
        // SAFETY: the caller guarantees a whole chunk of activations; same-sized vector types, bf16 pairs.
        unsafe {
            let av = _mm512_loadu_si512(a.add(32 * s) as *const __m512i);
            acc = _mm512_dpbf16_ps(
                acc,
                transmute::<__m512i, __m512bh>(av),
                transmute::<__m512i, __m512bh>(w),
            );
        }
    }
    acc
}

/// One row against `cols` weight rows (`w(j)`), four streamed at a time, bit-equal to `x86::rows_avx512`; `swap` plants a fault.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
pub unsafe fn rows<'w>(
    a: &[u16],
    sa: &[f32],
    swt: &[f32],
    off: usize,
    cols: usize,
    w: &impl Fn(usize) -> &'w [u8],
    k: usize,
    swap: bool,
) -> [f32; PAIRS] {
    let (blocks, chunks, full) = (k / BLOCK, k.div_ceil(CHUNK), k / CHUNK);
    let row_bytes = k / 2;
    assert!(a.len() >= chunks * CHUNK && sa.len() >= chunks && cols <= PAIRS);
    assert!(swt.len() >= blocks * GROUP && off + cols.next_multiple_of(4) <= GROUP);
    let t = Tables::new(swap);
    let mut out = [0f32; PAIRS];
    for g in (0..cols).step_by(4) {
        let rows: [&[u8]; 4] = [0, 1, 2, 3].map(|j| w((g + j).min(cols - 1)));
        assert!(rows.iter().all(|r| r.len() == row_bytes));
        let mut acc = _mm_setzero_ps();
        for (c, &sa) in sa.iter().enumerate().take(chunks) {
            let mut lanes = [_mm512_setzero_ps(); 4];
            for (lane, row) in lanes.iter_mut().zip(&rows) {
                let d = if c < full {
                    let p = row.as_ptr().wrapping_add(c * CHUNK_BYTES);
                    // The same chunk of the next four rows, which follow these in memory (a prefetch never faults).
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(4 * row_bytes) as *const i8);
                    // SAFETY: c < full: 64 bytes of the row at p.
                    unsafe { _mm512_loadu_si512(p as *const __m512i) }
                } else {
                    let pad = chunk_bytes(row, c);
                    // SAFETY: 64 bytes.
                    unsafe { _mm512_loadu_si512(pad.as_ptr() as *const __m512i) }
                };
                // SAFETY: chunk c lies inside the activation row.
                *lane = unsafe { chunk_lanes(a.as_ptr().add(c * CHUNK), d, &t) };
            }
            let inner = quarters4(lanes);
            let quarter = [
                _mm512_extractf32x4_ps::<0>(inner),
                _mm512_extractf32x4_ps::<1>(inner),
                _mm512_extractf32x4_ps::<2>(inner),
                _mm512_extractf32x4_ps::<3>(inner),
            ];
            let s = _mm_set1_ps(sa);
            for (b, &q) in quarter.iter().enumerate() {
                let kb = 4 * c + b;
                if kb < blocks {
                    // SAFETY: swt holds `blocks` rows of 16; off + g + 4 <= 16.
                    let sw = unsafe { _mm_loadu_ps(swt.as_ptr().add(kb * GROUP + off + g)) };
                    acc = _mm_fmadd_ps(q, _mm_mul_ps(s, sw), acc);
                }
            }
        }
        let mut four = [0f32; 4];
        // SAFETY: four floats.
        unsafe { _mm_storeu_ps(four.as_mut_ptr(), acc) };
        let n = (cols - g).min(4);
        out[g..g + n].copy_from_slice(&four[..n]);
    }
    out
}
