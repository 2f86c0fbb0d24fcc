//! Exact MXFP4 GEMV lanes: an 8-term FMA chain of e4m3 x e2m1 products rounds only at its last step, so VPDPBUSD's integer sum gives its bits.

use std::arch::x86_64::*;
use std::array::from_fn;

use super::cpu::{CHUNK, LAYOUT};
use super::x86::{
    CHUNK_BYTES, act16, add_chunk, add_chunk_coded, chunk_bytes, group_fma, lanes16, quarters4, quarters4_as,
};
use crate::gemm::{GROUP, PAIRS};
use tensorfold_formats::e2m1;

/// Largest |A| (A = a * 2^9): six products stay below 2^14 on the 2^-10 grid; seven reach it only with each |a| > 256 / 6, a bf16 grid of 1/4.
const MAX_A: i32 = 448 * 512;

/// One chunk's activations as s8 digit planes: element 2b (lo) and 2b + 1 (hi) of the chunk in byte b.
#[repr(C, align(64))]
pub(super) struct ChunkPlanes {
    /// Digit p of the lo elements in plane 2p, of the hi elements in plane 2p + 1; A = d0 + 256 d1 + 65536 d2.
    digits: [[i8; 64]; 6],
    /// Lane l: -12 times the sum of its eight A, digit 0's chain start (the weights enter as W + 12, unsigned).
    pub(super) init: [i32; 16],
}

impl ChunkPlanes {
    /// Word l of digit plane `plane`: the digits of the lane's four lo (even plane) or hi (odd plane) elements.
    pub(super) fn word(&self, plane: usize, l: usize) -> i32 {
        // SAFETY: bytes 4l..4l + 4 of a 64-byte plane (l < 16).
        unsafe { (self.digits[plane].as_ptr().add(4 * l) as *const i32).read_unaligned() }
    }
}

/// Largest |A >> s| of a two-digit chunk: A + 0x8080 stays within two bytes, so the third digit is 0.
const MAX_TWO: u32 = 0x7F7F;

/// Byte planes of one activation row, and per chunk whether all of its (bf16) activations are on the 2^-9 grid within +-448, as e4m3 values are.
pub(super) struct Planes {
    pub(super) chunks: Vec<ChunkPlanes>,
    /// 2^(s-10) per chunk: the value of one unit of its integer sums (s the two-digit shift, else 0).
    pub(super) units: Vec<f32>,
    pub(super) exact: Vec<bool>,
    /// Exact chunks whose digits of A >> s fit two planes (every A a multiple of 2^s, the largest within `MAX_TWO << s`).
    pub(super) two: Vec<bool>,
    /// Per chunk, block b's digit-0 chain start: the sum of lanes 4b..4b + 4 of its `init`.
    pub(super) starts: Vec<[i32; 4]>,
}

impl Planes {
    /// How many chunks take the integer path.
    pub(super) fn exact_chunks(&self) -> usize {
        self.exact.iter().filter(|&&e| e).count()
    }

    /// How many exact chunks take the two-digit path.
    #[cfg(test)]
    fn two_digit_chunks(&self) -> usize {
        self.exact.iter().zip(&self.two).filter(|&(&e, &t)| e && t).count()
    }
}

/// The shift s that leaves every A of a chunk (largest magnitude `top`, bitwise or `or`) within two digits, if there is one.
pub(super) fn two_digit_shift(top: u32, or: u32) -> Option<u32> {
    let s = (0..4).find(|&s| top <= MAX_TWO << s)?;
    (or == 0 || or.trailing_zeros() >= s).then_some(s)
}

/// Byte 4l + i of digit p's index: byte p of lane l of the first table (i even) or of the second (i odd).
const GATHER: [[u8; 64]; 3] = {
    let mut g = [[0; 64]; 3];
    let mut p = 0;
    while p < 3 {
        let mut b = 0;
        while b < 64 {
            g[p][b] = (b / 4 * 4 + p + 64 * (b % 2)) as u8;
            b += 1;
        }
        p += 1;
    }
    g
};

/// The planes of activation row `a` (decoded bf16 in `LAYOUT` order) over `chunks` chunks.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
pub(super) unsafe fn planes(a: &[u16], chunks: usize) -> Planes {
    assert!(a.len() >= chunks * CHUNK);
    let mut out = Planes {
        chunks: Vec::with_capacity(chunks),
        units: Vec::with_capacity(chunks),
        exact: Vec::with_capacity(chunks),
        two: Vec::with_capacity(chunks),
        starts: Vec::with_capacity(chunks),
    };
    let scale = _mm512_set1_ps(512.0);
    for c in 0..chunks {
        // SAFETY: chunk c lies inside the activation row (asserted above).
        let av = unsafe { act16(a.as_ptr().add(c * CHUNK)) };
        // Vector q, lane l: A of element 8l + q, and whether it is an integer of at most MAX_A.
        let mut ok: u16 = 0xFFFF;
        let big = _mm512_set1_epi32(MAX_A);
        let aq: [__m512i; 8] = from_fn(|q| {
            let x = _mm512_mul_ps(av[q], scale);
            let i = _mm512_cvtps_epi32(x);
            let back = _mm512_cmpeq_ps_mask(_mm512_cvtepi32_ps(i), x);
            ok &= back & _mm512_cmple_epu32_mask(_mm512_abs_epi32(i), big);
            i
        });
        let top = aq
            .iter()
            .fold(_mm512_setzero_si512(), |m, &v| _mm512_max_epu32(m, _mm512_abs_epi32(v)));
        let or = aq.iter().fold(_mm512_setzero_si512(), |m, &v| _mm512_or_si512(m, v));
        let shift =
            two_digit_shift(_mm512_reduce_max_epu32(top), _mm512_reduce_or_epi32(or) as u32).filter(|_| ok == 0xFFFF);
        // A two-digit chunk's digits are those of A >> s (exact: every A is a multiple of 2^s).
        let aq: [__m512i; 8] = match shift {
            Some(s) => aq.map(|v| _mm512_sra_epi32(v, _mm_cvtsi32_si128(s as i32))),
            None => aq,
        };
        let mut p = ChunkPlanes {
            digits: [[0; 64]; 6],
            init: [0; 16],
        };
        let sum = aq.iter().fold(_mm512_setzero_si512(), |s, &v| _mm512_add_epi32(s, v));
        let init = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-12));
        // SAFETY: 16 ints.
        unsafe { _mm512_storeu_si512(p.init.as_mut_ptr() as *mut __m512i, init) };
        out.starts.push(from_fn(|b| p.init[4 * b..4 * b + 4].iter().sum()));
        // Byte p of A + 0x808080 is balanced digit p plus 128 (|A| <= MAX_A keeps the top byte 0).
        let biased: [__m512i; 8] = from_fn(|q| _mm512_add_epi32(aq[q], _mm512_set1_epi32(0x80_8080)));
        for (digit, gather) in GATHER.iter().enumerate() {
            // SAFETY: 64 bytes.
            let idx = unsafe { _mm512_loadu_si512(gather.as_ptr() as *const __m512i) };
            for half in 0..2 {
                // Byte j of lane l: digit of element 8l + 2j + half, from vectors 2j + half.
                let v = |j: usize| biased[2 * j + half];
                let raw = _mm512_mask_blend_epi8(
                    0xCCCC_CCCC_CCCC_CCCC,
                    _mm512_permutex2var_epi8(v(0), idx, v(1)),
                    _mm512_permutex2var_epi8(v(2), idx, v(3)),
                );
                let digits = _mm512_xor_si512(raw, _mm512_set1_epi8(-128));
                // SAFETY: 64 bytes.
                unsafe { _mm512_storeu_si512(p.digits[2 * digit + half].as_mut_ptr() as *mut __m512i, digits) };
            }
        }
        out.units.push(2f32.powi(shift.unwrap_or(0) as i32 - 10));
        out.chunks.push(p);
        out.exact.push(ok == 0xFFFF);
        out.two.push(shift.is_some());
    }
    out
}

/// W + 12 (W = 2 * e2m1) of the low nibble of each byte, repeated over the 64 entries VPERMB indexes (the AVX2 lanes' VPSHUFB reads the first 32).
pub(super) const WEIGHT_TABLE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (2.0 * e2m1::TABLE[i % 16] + 12.0) as u8;
        i += 1;
    }
    t
};

/// Lane l of one row's chunk `d`: the integer sum of its 8 products A * W, three digits (`DIGITS` 3) or two.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
fn lanes_int<const DIGITS: usize>(d: __m512i, p: &Digits, t: __m512i) -> __m512i {
    let lo = _mm512_permutexvar_epi8(d, t);
    let hi = _mm512_permutexvar_epi8(_mm512_srli_epi16::<4>(d), t);
    // T_0 starts at the lane's offset (|T_0| < 2^25), T_1 and T_2 at 0 (|T_p| <= 8 * 24 * 128); T_0 + 2^8 T_1 + 2^16 T_2 is the lane's sum.
    let zero = _mm512_setzero_si512();
    let low = _mm512_add_epi32(
        digit_sum(p, 0, p.init, lo, hi),
        _mm512_slli_epi32::<8>(digit_sum(p, 1, zero, lo, hi)),
    );
    match DIGITS {
        3 => _mm512_add_epi32(low, _mm512_slli_epi32::<16>(digit_sum(p, 2, zero, lo, hi))),
        _ => low,
    }
}

/// T_p, lane l: `start` plus the sum over the lane's 8 elements of digit p times W + 12 (`lo`, `hi`: W + 12 of the even and odd elements).
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
fn digit_sum(p: &Digits, i: usize, start: __m512i, lo: __m512i, hi: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo, p.d[2 * i]), hi, p.d[2 * i + 1])
}

/// The 64 bytes of chunk `c` of the row at `row`, its line `ahead` bytes on asked of L2 (`L2`) or L1 first.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_chunk<const L2: bool>(row: *const u8, c: usize, ahead: usize) -> __m512i {
    let p = row.wrapping_add(c * CHUNK_BYTES);
    let next = p.wrapping_add(ahead) as *const i8;
    // A prefetch never faults.
    match L2 {
        true => _mm_prefetch::<_MM_HINT_T1>(next),
        false => _mm_prefetch::<_MM_HINT_T0>(next),
    }
    // SAFETY: the caller's row holds chunk c whole.
    unsafe { _mm512_loadu_si512(p as *const __m512i) }
}

/// One chunk's digit planes and digit 0's chain start in registers.
struct Digits {
    d: [__m512i; 6],
    init: __m512i,
}

/// `rows_avx512` on the streamed rows `rows` (each asked of L2 when `L2`, else of L1, `ahead` bytes on), exact chunks through `lanes_int`; the same bits for every input. `swt` holds `plain_codes`' words when `coded`, else decoded scales.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
pub(super) unsafe fn rows_exact<const L2: bool>(
    a: &[u16],
    sa: &[f32],
    planes: &Planes,
    swt: &[f32],
    coded: bool,
    rows: &[&[u8]; PAIRS],
    k: usize,
    ahead: usize,
) -> [f32; PAIRS] {
    let (blocks, chunks, full) = (k / super::cpu::BLOCK, k.div_ceil(CHUNK), k / CHUNK);
    assert!(a.len() >= chunks * CHUNK && sa.len() >= chunks && planes.units.len() >= chunks);
    let words = if coded { chunks * GROUP } else { blocks * GROUP };
    assert!(swt.len() >= words && rows.iter().all(|r| r.len() == k / 2));
    // SAFETY: 16 floats; 64 bytes.
    let (t, tw) = unsafe {
        (
            _mm512_loadu_ps(e2m1::TABLE.as_ptr()),
            _mm512_loadu_si512(WEIGHT_TABLE.as_ptr() as *const __m512i),
        )
    };
    let mut acc = _mm512_setzero_ps();
    for (c, &sa) in sa.iter().enumerate().take(chunks) {
        let mut q = [_mm512_setzero_ps(); 4];
        if c < full && planes.exact[c] {
            let pc = &planes.chunks[c];
            let two = planes.two[c];
            // SAFETY: 64-byte planes and a row of 16 ints (the third digit only where it is used).
            let pv = unsafe {
                Digits {
                    d: from_fn(|i| match i < 4 || !two {
                        true => _mm512_loadu_si512(pc.digits[i].as_ptr() as *const __m512i),
                        false => _mm512_setzero_si512(),
                    }),
                    init: _mm512_loadu_si512(pc.init.as_ptr() as *const __m512i),
                }
            };
            let unit = _mm512_set1_ps(planes.units[c]);
            // Loops and functions, not closures: a closure's body may be left out of line, without this function's features.
            for (g, q) in q.iter_mut().enumerate() {
                let mut lanes = [_mm512_setzero_si512(); 4];
                for (i, lane) in lanes.iter_mut().enumerate() {
                    // SAFETY: c < full: the row holds chunk c whole.
                    let d = unsafe { load_chunk::<L2>(rows[4 * g + i].as_ptr(), c, ahead) };
                    *lane = match two {
                        true => lanes_int::<2>(d, &pv, tw),
                        false => lanes_int::<3>(d, &pv, tw),
                    };
                }
                // Two digits: every block's sum is an integer below 2^24, so it is summed exactly and converted once; three: each lane rounds once, as its FMA chain would.
                let sums = match two {
                    true => _mm512_cvtepi32_ps(_mm512_castps_si512(quarters4_as::<true>([
                        _mm512_castsi512_ps(lanes[0]),
                        _mm512_castsi512_ps(lanes[1]),
                        _mm512_castsi512_ps(lanes[2]),
                        _mm512_castsi512_ps(lanes[3]),
                    ]))),
                    false => quarters4([
                        _mm512_cvtepi32_ps(lanes[0]),
                        _mm512_cvtepi32_ps(lanes[1]),
                        _mm512_cvtepi32_ps(lanes[2]),
                        _mm512_cvtepi32_ps(lanes[3]),
                    ]),
                };
                *q = _mm512_mul_ps(sums, unit);
            }
        } else {
            // SAFETY: chunk c lies inside the activation row.
            let av = unsafe { act16(a.as_ptr().add(c * CHUNK)) };
            for (g, q) in q.iter_mut().enumerate() {
                let d: [__m512i; 4] = from_fn(|i| {
                    let pad = chunk_bytes(rows[4 * g + i], c);
                    // SAFETY: 64 bytes.
                    unsafe { _mm512_loadu_si512(pad.as_ptr() as *const __m512i) }
                });
                *q = group_fma(&av, &d, t);
            }
        }
        // SAFETY: swt holds the scales of every chunk in its form (asserted on entry).
        acc = unsafe {
            match coded {
                true => add_chunk_coded(acc, q, c, blocks, sa, swt),
                false => add_chunk(acc, q, c, blocks, sa, swt),
            }
        };
    }
    lanes16(acc)
}

/// Whether this CPU runs `rows_exact`.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vbmi")
        && is_x86_feature_detected!("avx512vnni")
}

/// `LAYOUT` is the lane order `act16` reads (element 8l + q in vector q, lane l).
const _: () = assert!(LAYOUT.per_lane == 8);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mxfp4_gemm::testdata::{bytes, layout, rounding_lanes};
    use crate::mxfp4_gemm::x86::rows_avx512;
    use tensorfold_formats::{e4m3, e8m0};

    /// Both kernels over 16 random rows; returns (integer path bits, FMA path bits, exact chunks, two-digit chunks).
    fn run(values: &[f32], weights: &[u8], force_exact: bool) -> (Vec<u32>, Vec<u32>, usize, usize) {
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
            let mut p = planes(&a, chunks);
            if force_exact {
                p.exact.iter_mut().for_each(|e| *e = true);
            }
            let got = rows_exact::<false>(&a, &sa, &p, &swt, false, &rows, k, 1024);
            let l2 = rows_exact::<true>(&a, &sa, &p, &swt, false, &rows, k, 4096);
            assert_eq!(
                l2.map(f32::to_bits),
                got.map(f32::to_bits),
                "prefetch hints change no bit"
            );
            let want = rows_avx512(&a, &sa, &swt, 0, PAIRS, &|j| rows[j], k, Some(1024));
            let bits = |v: [f32; PAIRS]| v.iter().map(|x| x.to_bits()).collect();
            (bits(got), bits(want), p.exact_chunks(), p.two_digit_chunks())
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
            let (got, want, exact, _) = run(&values, &w, false);
            assert!(exact > 0, "seed {seed}: no chunk took the integer path");
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn lanes_that_round_at_their_last_step_agree() {
        if !available() {
            return;
        }
        let k = 512;
        let (values, w) = rounding_lanes(k);
        let (got, want, exact, _) = run(&values, &w, false);
        assert_eq!(exact, k / CHUNK);
        assert_eq!(got, want);
    }

    #[test]
    fn two_digit_shift_takes_the_smallest_shift_that_fits() {
        assert_eq!(two_digit_shift(0, 0), Some(0));
        assert_eq!(two_digit_shift(MAX_TWO, 1), Some(0));
        assert_eq!(two_digit_shift(MAX_TWO + 1, 1), None);
        assert_eq!(two_digit_shift(MAX_TWO + 1, 2), Some(1));
        assert_eq!(two_digit_shift(MAX_A as u32, 8), Some(3));
        assert_eq!(two_digit_shift(MAX_A as u32, 4), None);
        assert_eq!(two_digit_shift((MAX_TWO << 3) + 8, 8), None);
    }

    #[test]
    fn two_digit_chunks_give_the_fma_bits() {
        if !available() {
            return;
        }
        // Even chunks two-digit: codes on the 2^-6 grid up to 448, 240 or 120 (shifts 3, 2, 1), or any code up to 15 (shift 0); odd chunks any finite code.
        let k = 1024;
        for (seed, top) in [(30u64, 0x7E), (31, 0x77), (32, 0x6F), (33, 0x57)] {
            let values: Vec<f32> = bytes(seed, k)
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    let low = if top == 0x57 { 0 } else { 0x20 };
                    let code = match (i / CHUNK % 2, b % 17) {
                        (0, 0) => 0,
                        (0, _) => (b & 0x80) | (low + (b & 0x7F) % (top + 1 - low)),
                        _ => b & 0xF7,
                    };
                    e4m3::TABLE[code as usize]
                })
                .collect();
            let w = bytes(seed + 100, PAIRS * k / 2);
            let (got, want, exact, two) = run(&values, &w, false);
            assert_eq!((exact, two), (k / CHUNK, k / CHUNK / 2), "seed {seed}");
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn lanes_at_the_largest_sums_agree() {
        if !available() {
            return;
        }
        // Activations of +-448, +-416 and +-2^-9 against weights of +-6, 4 and 0.5: lane sums up to 8 * 448 * 6, every digit at its extremes.
        let k = 1024;
        let codes = [0x7E, 0xFE, 0x7D, 0xFD, 0x01, 0x81];
        for seed in 20..24 {
            let values: Vec<f32> = bytes(seed, k)
                .iter()
                .map(|&b| e4m3::TABLE[if seed == 20 { 0x7E } else { codes[b as usize % 6] }])
                .collect();
            let nibbles = [0x7, 0xF, 0x6, 0x1];
            let w: Vec<u8> = bytes(seed + 50, PAIRS * k / 2)
                .iter()
                .map(|&b| {
                    if seed == 20 {
                        0x77
                    } else {
                        nibbles[b as usize % 4] | nibbles[(b >> 2) as usize % 4] << 4
                    }
                })
                .collect();
            let (got, want, exact, _) = run(&values, &w, false);
            assert_eq!(exact, k / CHUNK, "seed {seed}");
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn activations_beyond_e4m3_take_the_fma_chain() {
        if !available() {
            return;
        }
        // 3072 * 6 then seven 2^-10 products: the chain keeps 18432 (ties to even each step), one rounding gives 18432 + 2^-7.
        let k = 256;
        let values: Vec<f32> = (0..k)
            .map(|i| if i % 8 == 0 { 3072.0 } else { 2f32.powi(-9) })
            .collect();
        let w: Vec<u8> = (0..PAIRS * k / 2)
            .map(|i| if i % 4 == 0 { 0x17 } else { 0x11 })
            .collect();
        let (got, want, exact, _) = run(&values, &w, false);
        assert_eq!(exact, 0);
        assert_eq!(got, want);
        let (forced, want, _, _) = run(&values, &w, true);
        assert_ne!(
            forced, want,
            "the integer sum must differ here, or this test shows nothing"
        );
    }

    #[test]
    fn non_finite_activations_take_the_fma_chain() {
        if !available() {
            return;
        }
        let k = 256;
        let mut values: Vec<f32> = bytes(9, k).iter().map(|&c| e4m3::TABLE[c as usize & 0x77]).collect();
        values[130] = f32::NAN;
        let w = bytes(10, PAIRS * k / 2);
        let (got, want, exact, _) = run(&values, &w, false);
        assert_eq!(exact, 1, "only the chunk without the NaN is exact");
        assert_eq!(got, want);
    }
}
