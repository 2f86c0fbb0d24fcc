//! AVX-512 and AVX2 paths of `mxfp4_gemm`: lane l holds elements 8l..8l+7; `vpermps` on the word >> 4q decodes nibble q.

use std::arch::x86_64::*;
use std::array::from_fn;

use tensorfold_formats::e2m1;

use super::cpu::{BLOCK, CHUNK};
use crate::gemm::x86::{bf16_pair8, bf16_pair16, decode_e8m0_x16, transpose16};
use crate::gemm::{GROUP, PAIRS};

/// Weight bytes per chunk.
pub(super) const CHUNK_BYTES: usize = CHUNK / 2;

/// Nibble `q` of every 32-bit lane of `d`, decoded through the 16-entry table `t`.
#[inline]
#[target_feature(enable = "avx512f")]
fn nibble16(d: __m512i, q: usize, t: __m512) -> __m512 {
    let idx = match q {
        0 => d,
        1 => _mm512_srli_epi32::<4>(d),
        2 => _mm512_srli_epi32::<8>(d),
        3 => _mm512_srli_epi32::<12>(d),
        4 => _mm512_srli_epi32::<16>(d),
        5 => _mm512_srli_epi32::<20>(d),
        6 => _mm512_srli_epi32::<24>(d),
        _ => _mm512_srli_epi32::<28>(d),
    };
    _mm512_permutexvar_ps(idx, t)
}

/// The activation vectors of one chunk: vector q lane l is element 8l + q.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn act16(a: *const u16) -> [__m512; 8] {
    // SAFETY: the caller guarantees a whole chunk (128 values).
    let (a0, a1, a2, a3) = unsafe {
        (
            bf16_pair16(a),
            bf16_pair16(a.add(32)),
            bf16_pair16(a.add(64)),
            bf16_pair16(a.add(96)),
        )
    };
    [a0[1], a0[0], a1[1], a1[0], a2[1], a2[0], a3[1], a3[0]]
}

/// One pair's lane vector for a chunk: lane l sums elements 8l..8l+7 by FMA, in order.
#[inline]
#[target_feature(enable = "avx512f")]
fn chunk16(av: &[__m512; 8], d: __m512i, t: __m512) -> __m512 {
    let mut l = _mm512_setzero_ps();
    for (q, &a) in av.iter().enumerate() {
        l = _mm512_fmadd_ps(a, nibble16(d, q, t), l);
    }
    l
}

/// Quarter b, lane i: block b of row `d[i]`'s chunk; the four rows' FMA chains interleaved, each still in element order.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn group_fma(av: &[__m512; 8], d: &[__m512i; 4], t: __m512) -> __m512 {
    let mut lanes = [_mm512_setzero_ps(); 4];
    for (qi, &a) in av.iter().enumerate() {
        for (lane, &d) in lanes.iter_mut().zip(d) {
            *lane = _mm512_fmadd_ps(a, nibble16(d, qi, t), *lane);
        }
    }
    quarters4(lanes)
}

/// The block inners of four lane vectors: quarter b, lane i is (l0 + l2) + (l1 + l3) of `v[i]`'s quarter b.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn quarters4(v: [__m512; 4]) -> __m512 {
    quarters4_as::<false>(v)
}

/// `quarters4`, its adds in 32-bit integers on the lanes' bits when `INT`.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn quarters4_as<const INT: bool>(v: [__m512; 4]) -> __m512 {
    let u0 = add_as::<INT>(
        _mm512_shuffle_ps::<0x44>(v[0], v[1]),
        _mm512_shuffle_ps::<0xEE>(v[0], v[1]),
    );
    let u1 = add_as::<INT>(
        _mm512_shuffle_ps::<0x44>(v[2], v[3]),
        _mm512_shuffle_ps::<0xEE>(v[2], v[3]),
    );
    add_as::<INT>(_mm512_shuffle_ps::<0x88>(u0, u1), _mm512_shuffle_ps::<0xDD>(u0, u1))
}

/// `a + b` as floats, or as 32-bit integers on their bits when `INT`.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_as<const INT: bool>(a: __m512, b: __m512) -> __m512 {
    match INT {
        true => _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b))),
        false => _mm512_add_ps(a, b),
    }
}

/// The 64 bytes of chunk `c` of `row`, zero-padded past its end.
#[inline(always)]
pub(super) fn chunk_bytes(row: &[u8], c: usize) -> [u8; CHUNK_BYTES] {
    let mut pad = [0u8; CHUNK_BYTES];
    let tail = &row[c * CHUNK_BYTES..];
    pad[..tail.len().min(CHUNK_BYTES)].copy_from_slice(&tail[..tail.len().min(CHUNK_BYTES)]);
    pad
}

/// One row against `cols` weight rows (`w(j)`), all 16 streamed in one pass; block kb of column j scaled by sa[kb/4] * swt[..].
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
pub unsafe fn rows_avx512<'w>(
    a: &[u16],
    sa: &[f32],
    swt: &[f32],
    off: usize,
    cols: usize,
    w: &impl Fn(usize) -> &'w [u8],
    k: usize,
    ahead: Option<usize>,
) -> [f32; PAIRS] {
    let (blocks, chunks, full) = (k / BLOCK, k.div_ceil(CHUNK), k / CHUNK);
    let row_bytes = k / 2;
    assert!(a.len() >= chunks * CHUNK && sa.len() >= chunks && (1..=PAIRS).contains(&cols));
    assert!(swt.len() >= blocks * GROUP && off == 0);
    let rows: [&[u8]; PAIRS] = from_fn(|j| w(j.min(cols - 1)));
    assert!(rows.iter().all(|r| r.len() == row_bytes));
    let groups = cols.div_ceil(4);
    // SAFETY: 16 floats.
    let t = unsafe { _mm512_loadu_ps(e2m1::TABLE.as_ptr()) };
    // Lane j: column j.
    let mut acc = _mm512_setzero_ps();
    for (c, &sa) in sa.iter().enumerate().take(chunks) {
        // SAFETY: chunk c lies inside the activation row.
        let av = unsafe { act16(a.as_ptr().add(c * CHUNK)) };
        // Quarter b, lane i of q[g]: block 4c + b of column 4g + i.
        let mut q = [_mm512_setzero_ps(); 4];
        for (g, q) in q.iter_mut().enumerate().take(groups) {
            let d: [__m512i; 4] = from_fn(|i| {
                let row = rows[4 * g + i];
                if c < full {
                    let p = row.as_ptr().wrapping_add(c * CHUNK_BYTES);
                    // Rows from streams: each row's bytes `ahead`; else the next 16 rows (contiguous after these) in address order.
                    let next = match ahead {
                        Some(d) => p.wrapping_add(d),
                        None => rows[0]
                            .as_ptr()
                            .wrapping_add(PAIRS * row_bytes + PAIRS * CHUNK_BYTES * c + CHUNK_BYTES * (4 * g + i)),
                    };
                    // A prefetch never faults.
                    _mm_prefetch::<_MM_HINT_T0>(next as *const i8);
                    // SAFETY: c < full: 64 bytes of the row at p.
                    unsafe { _mm512_loadu_si512(p as *const __m512i) }
                } else {
                    let pad = chunk_bytes(row, c);
                    // SAFETY: 64 bytes.
                    unsafe { _mm512_loadu_si512(pad.as_ptr() as *const __m512i) }
                }
            });
            *q = group_fma(&av, &d, t);
        }
        // SAFETY: swt holds `blocks` rows of 16 (asserted on entry).
        acc = unsafe { add_chunk(acc, q, c, blocks, sa, swt) };
    }
    lanes16(acc)
}

/// `acc` plus chunk `c`'s block sums `q` (quarter-major) times the activation scale `sa` and each block's 16 weight scales in `swt` (which must hold `blocks` rows), blocks from `blocks` on left out.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn add_chunk(
    mut acc: __m512,
    q: [__m512; 4],
    c: usize,
    blocks: usize,
    sa: f32,
    swt: &[f32],
) -> __m512 {
    let s = _mm512_set1_ps(sa);
    for (b, inner) in per_block(q).into_iter().enumerate() {
        let kb = 4 * c + b;
        if kb < blocks {
            // SAFETY: the caller's swt holds `blocks` rows of 16.
            let sw = unsafe { _mm512_loadu_ps(swt.as_ptr().add(kb * GROUP)) };
            acc = _mm512_fmadd_ps(inner, _mm512_mul_ps(s, sw), acc);
        }
    }
    acc
}

/// `add_chunk` with the weight scales as codes: lane j of `codes[16c..]` holds column j's codes of blocks 4c..4c + 3, none 0 or 255.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn add_chunk_coded(
    mut acc: __m512,
    q: [__m512; 4],
    c: usize,
    blocks: usize,
    sa: f32,
    codes: &[f32],
) -> __m512 {
    let s = _mm512_set1_ps(sa);
    // SAFETY: the caller's codes hold 16 words for chunk c.
    let v = unsafe { _mm512_loadu_si512(codes.as_ptr().add(16 * c) as *const __m512i) };
    let sw = plain_scales(v);
    for (b, inner) in per_block(q).into_iter().enumerate() {
        if 4 * c + b < blocks {
            acc = _mm512_fmadd_ps(inner, _mm512_mul_ps(s, sw[b]), acc);
        }
    }
    acc
}

/// Byte b of each word of `v` (an e8m0 code, not 0 or 255) as its scale, `code << 23`.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn plain_scales(v: __m512i) -> [__m512; 4] {
    let exponent = _mm512_set1_epi32(0x7F80_0000);
    [
        _mm512_slli_epi32::<23>(v),
        _mm512_slli_epi32::<15>(v),
        _mm512_slli_epi32::<7>(v),
        _mm512_srli_epi32::<1>(v),
    ]
    .map(|bits| _mm512_castsi512_ps(_mm512_and_si512(bits, exponent)))
}

/// The 16 lanes of `acc`.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn lanes16(acc: __m512) -> [f32; PAIRS] {
    let mut out = [0f32; PAIRS];
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
    out
}

/// Quarter-major to block-major: vector b of the result holds quarter b of `q[0]`, `q[1]`, `q[2]`, `q[3]` in turn.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn per_block(q: [__m512; 4]) -> [__m512; 4] {
    let t0 = _mm512_shuffle_f32x4::<0x44>(q[0], q[1]);
    let t1 = _mm512_shuffle_f32x4::<0x44>(q[2], q[3]);
    let t2 = _mm512_shuffle_f32x4::<0xEE>(q[0], q[1]);
    let t3 = _mm512_shuffle_f32x4::<0xEE>(q[2], q[3]);
    [
        _mm512_shuffle_f32x4::<0x88>(t0, t1),
        _mm512_shuffle_f32x4::<0xDD>(t0, t1),
        _mm512_shuffle_f32x4::<0x88>(t2, t3),
        _mm512_shuffle_f32x4::<0xDD>(t2, t3),
    ]
}

/// Four activation rows against four weight rows: 16 pairs (pair = row * 4 + column).
#[target_feature(enable = "avx512f")]
pub unsafe fn tile_avx512(a: [&[u16]; 4], w: [&[u8]; 4], k: usize, panel: &[f32]) -> [f32; PAIRS] {
    let (blocks, chunks, full) = (k / BLOCK, k.div_ceil(CHUNK), k / CHUNK);
    assert!(a.iter().all(|r| r.len() >= chunks * CHUNK) && panel.len() >= blocks * PAIRS);
    assert!(w.iter().all(|r| r.len() == k / 2));
    // SAFETY: 16 floats.
    let t = unsafe { _mm512_loadu_ps(e2m1::TABLE.as_ptr()) };
    let mut acc = _mm512_setzero_ps();
    for c in 0..chunks {
        let mut d = [_mm512_setzero_si512(); 4];
        for (d, row) in d.iter_mut().zip(&w) {
            *d = if c < full {
                // SAFETY: c < full: 64 bytes of the row at chunk c.
                unsafe { _mm512_loadu_si512(row.as_ptr().add(c * CHUNK_BYTES) as *const __m512i) }
            } else {
                let pad = chunk_bytes(row, c);
                // SAFETY: 64 bytes.
                unsafe { _mm512_loadu_si512(pad.as_ptr() as *const __m512i) }
            };
        }
        let mut groups = [_mm512_setzero_ps(); 4];
        for (ri, group) in groups.iter_mut().enumerate() {
            // SAFETY: chunk c lies inside every activation row.
            let av = unsafe { act16(a[ri].as_ptr().add(c * CHUNK)) };
            let mut lanes = [_mm512_setzero_ps(); 4];
            for (lane, &d) in lanes.iter_mut().zip(&d) {
                *lane = chunk16(&av, d, t);
            }
            *group = quarters4(lanes);
        }
        for (b, &inner) in per_block(groups).iter().enumerate() {
            let kb = 4 * c + b;
            if kb < blocks {
                // SAFETY: the panel holds `blocks` vectors.
                acc = _mm512_fmadd_ps(inner, unsafe { _mm512_loadu_ps(panel.as_ptr().add(kb * PAIRS)) }, acc);
            }
        }
    }
    let mut out = [0f32; PAIRS];
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
    out
}

/// Nibble `q` of every 32-bit lane of `d` as e2m1: magnitude from the 8-entry table, sign from bit 4q + 3.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn nibble8(d: __m256i, q: usize, mag: __m256) -> __m256 {
    let (idx, top) = match q {
        0 => (d, _mm256_slli_epi32::<28>(d)),
        1 => (_mm256_srli_epi32::<4>(d), _mm256_slli_epi32::<24>(d)),
        2 => (_mm256_srli_epi32::<8>(d), _mm256_slli_epi32::<20>(d)),
        3 => (_mm256_srli_epi32::<12>(d), _mm256_slli_epi32::<16>(d)),
        4 => (_mm256_srli_epi32::<16>(d), _mm256_slli_epi32::<12>(d)),
        5 => (_mm256_srli_epi32::<20>(d), _mm256_slli_epi32::<8>(d)),
        6 => (_mm256_srli_epi32::<24>(d), _mm256_slli_epi32::<4>(d)),
        _ => (_mm256_srli_epi32::<28>(d), d),
    };
    let sign = _mm256_and_si256(top, _mm256_set1_epi32(i32::MIN));
    _mm256_or_ps(_mm256_permutevar8x32_ps(mag, idx), _mm256_castsi256_ps(sign))
}

/// Every pair (a[ri], w(ci)) on its own, 8 lanes at a time.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn pairs_avx2<'w>(
    a: &[&[u16]],
    nr: usize,
    w: &impl Fn(usize) -> &'w [u8],
    k: usize,
    panel: &[f32],
) -> [f32; PAIRS] {
    let (blocks, chunks) = (k / BLOCK, k.div_ceil(CHUNK));
    assert!(a.iter().all(|r| r.len() >= chunks * CHUNK) && panel.len() >= blocks * PAIRS && a.len() * nr <= PAIRS);
    // SAFETY: 8 floats.
    let mag = unsafe { _mm256_loadu_ps(e2m1::TABLE.as_ptr()) };
    let mut out = [0f32; PAIRS];
    for (ri, ar) in a.iter().enumerate() {
        for ci in 0..nr {
            let row = w(ci);
            assert_eq!(row.len(), k / 2);
            let mut acc = 0f32;
            for c in 0..chunks {
                let bytes = chunk_bytes(row, c);
                let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                // SAFETY: 64 bytes; chunk c lies inside the activation row.
                unsafe {
                    let dl = _mm256_loadu_si256(bytes.as_ptr() as *const __m256i);
                    let dh = _mm256_loadu_si256(bytes.as_ptr().add(32) as *const __m256i);
                    for t in 0..4 {
                        let at = ar.as_ptr().add(c * CHUNK + 32 * t);
                        let (al, ah) = (bf16_pair8(at), bf16_pair8(at.add(16)));
                        for h in 0..2 {
                            lo = _mm256_fmadd_ps(al[1 - h], nibble8(dl, 2 * t + h, mag), lo);
                            hi = _mm256_fmadd_ps(ah[1 - h], nibble8(dh, 2 * t + h, mag), hi);
                        }
                    }
                }
                let mut inner = [0f32; 8];
                for (half, v) in [lo, hi].into_iter().enumerate() {
                    let s = _mm256_add_ps(v, _mm256_shuffle_ps::<0x4E>(v, v));
                    let s = _mm256_add_ps(s, _mm256_shuffle_ps::<0xB1>(s, s));
                    // SAFETY: 8 floats.
                    unsafe { _mm256_storeu_ps(inner.as_mut_ptr(), s) };
                    for (b, &x) in [inner[0], inner[4]].iter().enumerate() {
                        let kb = 4 * c + 2 * half + b;
                        if kb < blocks {
                            acc = x.mul_add(panel[kb * PAIRS + ri * nr + ci], acc);
                        }
                    }
                }
            }
            out[ri * nr + ci] = acc;
        }
    }
    out
}

/// Decoded scales `swt[kb * GROUP + j]` of the 16 scale rows `rows` for whole groups of 16 blocks; returns how many blocks it filled.
pub fn fill_scales(rows: &[&[u8]; GROUP], swt: &mut [f32]) -> usize {
    if !is_x86_feature_detected!("avx2") {
        return 0;
    }
    // SAFETY: avx2 is present, checked above.
    unsafe { fill_scales_avx2(rows, swt) }
}

/// `fill_scales` with the e8m0 decode inlined.
#[target_feature(enable = "avx2")]
unsafe fn fill_scales_avx2(rows: &[&[u8]; GROUP], swt: &mut [f32]) -> usize {
    let blocks = rows[0].len();
    // The next group's scale rows, which follow these in memory (a prefetch never faults).
    let next = rows[0].as_ptr().wrapping_add(GROUP * blocks);
    for line in (0..GROUP * blocks).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(line) as *const i8);
    }
    // SAFETY: avx2 is enabled here.
    unsafe { decode_scales(rows, swt) }
}

/// `fill_scales` without its prefetch, for scale rows that are not contiguous.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn decode_scales(rows: &[&[u8]; GROUP], swt: &mut [f32]) -> usize {
    let blocks = rows[0].len();
    let whole = blocks / 16 * 16;
    for kb0 in (0..whole).step_by(16) {
        // SAFETY: kb0 + 16 <= blocks bytes in every row; SSE2 is part of x86_64.
        let x: [__m128i; 16] = from_fn(|j| unsafe { _mm_loadu_si128(rows[j].as_ptr().add(kb0) as *const __m128i) });
        // No code 0 or 255 among the 256: every scale is `code << 23`.
        let odd = x.iter().fold(_mm_setzero_si128(), |m, &v| {
            let edge = _mm_or_si128(
                _mm_cmpeq_epi8(v, _mm_setzero_si128()),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(-1)),
            );
            _mm_or_si128(m, edge)
        });
        let plain = _mm_testz_si128(odd, odd) == 1;
        for (c, col) in transpose16(x).into_iter().enumerate() {
            let dst: &mut [f32; 16] = (&mut swt[(kb0 + c) * GROUP..][..GROUP]).try_into().expect("16 scales");
            if plain {
                for (h, half) in [col, _mm_unpackhi_epi64(col, col)].into_iter().enumerate() {
                    let bits = _mm256_slli_epi32::<23>(_mm256_cvtepu8_epi32(half));
                    // SAFETY: 8 floats fit from offset 8h of a 16-float array.
                    unsafe { _mm256_storeu_ps(dst.as_mut_ptr().add(8 * h), _mm256_castsi256_ps(bits)) };
                }
            } else {
                decode_e8m0_x16(col, dst);
            }
        }
    }
    whole
}

/// `decode_scales` when no code is 0 or 255 (every scale is then `code << 23`) and rows are whole 64-byte lines; else 0 blocks.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn decode_scales_plain(rows: &[&[u8]; GROUP], swt: &mut [f32]) -> usize {
    let blocks = rows[0].len();
    if swt.len() < blocks * GROUP || !plain_rows(rows) {
        return 0;
    }
    for kb0 in (0..blocks).step_by(64) {
        // SAFETY: kb0 + 64 <= blocks bytes in every row.
        let x: [__m512i; 16] = from_fn(|j| unsafe { _mm512_loadu_si512(rows[j].as_ptr().add(kb0) as *const __m512i) });
        // Word j of t[c]: codes kb0 + 4c..kb0 + 4c + 3 of row j, one a byte; each goes to bits 23..30.
        for (c, t) in transpose16_epi32(x).into_iter().enumerate() {
            for (b, sw) in plain_scales(t).into_iter().enumerate() {
                // SAFETY: swt holds `blocks` rows of 16 (checked above).
                unsafe { _mm512_storeu_ps(swt.as_mut_ptr().add((kb0 + 4 * c + b) * GROUP), sw) };
            }
        }
    }
    blocks
}

/// Whether the 16 scale rows are whole 64-byte lines of one length with no code 0 or 255 (every scale then `code << 23`).
#[target_feature(enable = "avx512f,avx512bw")]
fn plain_rows(rows: &[&[u8]; GROUP]) -> bool {
    let blocks = rows[0].len();
    if !whole_lines(rows) {
        return false;
    }
    let (mut lo, mut hi) = (_mm512_set1_epi8(-1), _mm512_setzero_si512());
    for r in rows {
        for off in (0..blocks).step_by(64) {
            // SAFETY: off + 64 <= blocks bytes in every row.
            let v = unsafe { _mm512_loadu_si512(r.as_ptr().add(off) as *const __m512i) };
            (lo, hi) = (_mm512_min_epu8(lo, v), _mm512_max_epu8(hi, v));
        }
    }
    no_edge_codes(lo, hi)
}

/// Whether the 16 scale rows are whole 64-byte lines of one length.
fn whole_lines(rows: &[&[u8]; GROUP]) -> bool {
    let blocks = rows[0].len();
    blocks.is_multiple_of(64) && rows.iter().all(|r| r.len() == blocks)
}

/// Whether codes whose bytewise least is `lo` and greatest `hi` hold no 0 and no 255.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn no_edge_codes(lo: __m512i, hi: __m512i) -> bool {
    _mm512_cmpeq_epi8_mask(lo, _mm512_setzero_si512()) == 0 && _mm512_cmpeq_epi8_mask(hi, _mm512_set1_epi8(-1)) == 0
}

/// Whether the 16 scale rows are plain (no code 0 or 255) whole 64-byte lines; if so `codes` gets, for each chunk c, column j's four codes in word 16c + j (as `add_chunk_coded` reads them), else holds nothing to read.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn plain_codes(rows: &[&[u8]; GROUP], codes: &mut [f32]) -> bool {
    let blocks = rows[0].len();
    if !whole_lines(rows) || codes.len() < blocks * GROUP / 4 {
        return false;
    }
    // The rows are read once: each line is checked for codes 0 and 255 as it is transposed.
    let (mut lo, mut hi) = (_mm512_set1_epi8(-1), _mm512_setzero_si512());
    for kb0 in (0..blocks).step_by(64) {
        // SAFETY: kb0 + 64 <= blocks bytes in every row.
        let x: [__m512i; 16] = from_fn(|j| unsafe { _mm512_loadu_si512(rows[j].as_ptr().add(kb0) as *const __m512i) });
        for v in x {
            (lo, hi) = (_mm512_min_epu8(lo, v), _mm512_max_epu8(hi, v));
        }
        for (c, t) in transpose16_epi32(x).into_iter().enumerate() {
            // SAFETY: codes holds blocks / 4 chunks of 16 words (checked above).
            unsafe { _mm512_storeu_si512(codes.as_mut_ptr().add((kb0 / 4 + c) * GROUP) as *mut __m512i, t) };
        }
    }
    no_edge_codes(lo, hi)
}

/// `plain_codes` on AVX2: whether the 16 scale rows are plain and a whole number of 32-byte vectors; if so `codes` gets column j's four codes of chunk c in word 16c + j.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn plain_codes_avx2(rows: &[&[u8]; GROUP], codes: &mut [f32]) -> bool {
    let blocks = rows[0].len();
    if !blocks.is_multiple_of(32) || codes.len() < blocks * GROUP / 4 || rows.iter().any(|r| r.len() != blocks) {
        return false;
    }
    let (mut low, mut high) = (_mm256_set1_epi8(-1), _mm256_setzero_si256());
    for r in rows {
        for at in (0..blocks).step_by(32) {
            // SAFETY: at + 32 <= blocks bytes of the row (checked above).
            let v = unsafe { _mm256_loadu_si256(r.as_ptr().add(at) as *const __m256i) };
            low = _mm256_min_epu8(low, v);
            high = _mm256_max_epu8(high, v);
        }
    }
    let edge = _mm256_or_si256(
        _mm256_cmpeq_epi8(low, _mm256_setzero_si256()),
        _mm256_cmpeq_epi8(high, _mm256_set1_epi8(-1)),
    );
    if _mm256_testz_si256(edge, edge) == 0 {
        return false;
    }
    for at in (0..blocks).step_by(32) {
        for half in 0..2 {
            let mut x = [_mm256_setzero_si256(); 8];
            for (j, x) in x.iter_mut().enumerate() {
                // SAFETY: at + 32 <= blocks bytes of every row (checked above).
                *x = unsafe { _mm256_loadu_si256(rows[8 * half + j].as_ptr().add(at) as *const __m256i) };
            }
            for (c, t) in transpose8_epi32(x).into_iter().enumerate() {
                // SAFETY: codes holds blocks / 4 chunks of 16 words (checked above).
                unsafe {
                    _mm256_storeu_si256(
                        codes.as_mut_ptr().add((at / 4 + c) * GROUP + 8 * half) as *mut __m256i,
                        t,
                    )
                };
            }
        }
    }
    true
}

/// Transposes 8 rows of 8 words: output row c holds word c of every input row.
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8_epi32(x: [__m256i; 8]) -> [__m256i; 8] {
    // Plain loops, not closures, so every intrinsic inlines; within each 128-bit half, words of row pairs interleave first.
    let mut t = x;
    for i in (0..8).step_by(2) {
        t[i] = _mm256_unpacklo_epi32(x[i], x[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(x[i], x[i + 1]);
    }
    // Then word pairs of row quads: u[c] (u[c + 4]) holds words c and c + 4 of rows 0..3 (4..7), one a 128-bit half.
    let mut u = t;
    for (slot, i) in [(0, 0), (2, 1), (4, 4), (6, 5)] {
        u[slot] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[slot + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    }
    let mut out = u;
    for c in 0..4 {
        out[c] = _mm256_permute2x128_si256::<0x20>(u[c], u[c + 4]);
        out[c + 4] = _mm256_permute2x128_si256::<0x31>(u[c], u[c + 4]);
    }
    out
}

/// Transposes 16 rows of 16 words: output row c holds word c of every input row.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose16_epi32(mut x: [__m512i; 16]) -> [__m512i; 16] {
    // Each round interleaves rows i and i + 8 (rotating the 8-bit (row, word) index left by one); four rounds swap row and word.
    let lo: [i32; 16] = from_fn(|j| (j / 2 + 16 * (j % 2)) as i32);
    // SAFETY: 16 ints.
    let lo = unsafe { _mm512_loadu_si512(lo.as_ptr() as *const __m512i) };
    let hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    for _ in 0..4 {
        let mut y = x;
        for i in 0..8 {
            y[2 * i] = _mm512_permutex2var_epi32(x[i], lo, x[i + 8]);
            y[2 * i + 1] = _mm512_permutex2var_epi32(x[i], hi, x[i + 8]);
        }
        x = y;
    }
    x
}
