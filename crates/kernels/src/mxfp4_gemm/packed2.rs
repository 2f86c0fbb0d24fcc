//! The packed MXFP4 layout's kernel on AVX2: each 64-byte vector of 16 rows' words read as two halves of 8 rows, with the AVX-512 kernel's bits.

use std::arch::x86_64::*;

use super::cpu::{BLOCK, CHUNK, LAYOUT};
use super::exact::WEIGHT_TABLE;
use super::exact2::{ChunkDigits, Digits, plain_scale};
use super::packed::{GroupFn, Packed, folded_scale};
use super::x86::{CHUNK_BYTES, nibble8};
use crate::gemm::GROUP;
use crate::gemm::groups::{AHEAD, ROWS};
use tensorfold_formats::e2m1;

/// Rows of a half group, one 32-bit lane each.
const HALF: usize = ROWS / 2;

/// Word `l` of plane `p`, half `h` of a chunk's digits: the digits of lane l's four lo (h 0) or hi (h 1) elements.
#[inline(always)]
fn digit_word(ch: &ChunkDigits, p: usize, h: usize, l: usize) -> __m256i {
    let b = &ch.d[p][h][4 * l..4 * l + 4];
    let word = i32::from_le_bytes([b[0], b[1], b[2], b[3]].map(|x| x as u8));
    // SAFETY: AVX is a part of every form's features, which the callers enable.
    unsafe { _mm256_set1_epi32(word) }
}

/// Half `h` of word `l` of the chunk at `base` (the word's line `AHEAD` bytes on asked of L1 and L2 with half 0).
#[inline(always)]
unsafe fn half_word(base: *const u8, l: usize, h: usize) -> __m256i {
    // SAFETY: the caller's chunk holds word l of 16 rows; a prefetch never faults.
    unsafe {
        if h == 0 {
            _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(64 * l + AHEAD.0) as *const i8);
            _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(64 * l + AHEAD.1) as *const i8);
        }
        _mm256_loadu_si256(base.add(64 * l + 32 * h) as *const __m256i)
    }
}

/// W + 12 of the lo and hi nibbles of every byte of `d`.
#[inline(always)]
unsafe fn nibbles(d: __m256i, t: __m256i) -> [__m256i; 2] {
    // SAFETY: the callers enable AVX2.
    unsafe {
        let m = _mm256_set1_epi8(0x0F);
        [
            _mm256_shuffle_epi8(t, _mm256_and_si256(d, m)),
            _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16::<4>(d), m)),
        ]
    }
}

/// `acc` (lo and hi chains) plus each lane's four byte products of `lo` with `dlo` and of `hi` with `dhi`, by VPDPBUSD.
#[inline(always)]
unsafe fn dot<const VNNI: u8>(acc: &mut [__m256i; 2], lo: __m256i, dlo: __m256i, hi: __m256i, dhi: __m256i) {
    // SAFETY: the callers enable AVX2 and `VNNI`'s features.
    unsafe {
        acc[0] = dpbusd::<VNNI>(acc[0], lo, dlo);
        acc[1] = dpbusd::<VNNI>(acc[1], hi, dhi);
    }
}

/// `dot` in one chain, or by VPMADDUBSW where `VNNI` is 0 (pair sums stay within 2 * 24 * 128, their sum within i16).
#[inline(always)]
unsafe fn dot_one<const VNNI: u8>(acc: __m256i, lo: __m256i, dlo: __m256i, hi: __m256i, dhi: __m256i) -> __m256i {
    // SAFETY: the callers enable AVX2 and `VNNI`'s features.
    unsafe {
        match VNNI {
            0 => {
                let pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, dlo), _mm256_maddubs_epi16(hi, dhi));
                _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
            }
            _ => dpbusd::<VNNI>(dpbusd::<VNNI>(acc, lo, dlo), hi, dhi),
        }
    }
}

/// VPDPBUSD of AVX-VNNI (`VNNI` 1) or AVX-512 VNNI (2); the VPMADDUBSW form (0) has none.
#[inline(always)]
unsafe fn dpbusd<const VNNI: u8>(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    // SAFETY: the callers enable `VNNI`'s features.
    unsafe {
        match VNNI {
            1 => _mm256_dpbusd_avx_epi32(acc, u, s),
            2 => _mm256_dpbusd_epi32(acc, u, s),
            _ => unreachable!("the VPMADDUBSW form has no VPDPBUSD"),
        }
    }
}

/// A digit's two chains summed.
#[inline(always)]
unsafe fn both(acc: [__m256i; 2]) -> __m256i {
    // SAFETY: the callers enable AVX2.
    unsafe { _mm256_add_epi32(acc[0], acc[1]) }
}

/// Block b's exact integer sums, 8 rows per half, over its four words, digits 0 and 1; digit 0's chains start at the block's offset.
#[inline(always)]
unsafe fn two_digit_block<const VNNI: u8>(ch: &ChunkDigits, b: usize, base: *const u8, t: __m256i) -> [__m256i; 2] {
    // SAFETY: the callers enable AVX2 and `VNNI`'s features; the chunk holds the block's words.
    unsafe {
        if VNNI == 0 {
            return two_digit_block_pairs(ch, b, base, t);
        }
        let zero = _mm256_setzero_si256();
        let mut t0 = [[_mm256_set1_epi32(ch.block_offset[4 * b]), zero]; 2];
        let mut t1 = [[zero; 2]; 2];
        // Loops and functions, not closures: a closure's body may be left out of line, without this function's features.
        for l in 4 * b..4 * b + 4 {
            let (d00, d01) = (digit_word(ch, 0, 0, l), digit_word(ch, 0, 1, l));
            let (d10, d11) = (digit_word(ch, 1, 0, l), digit_word(ch, 1, 1, l));
            for h in 0..2 {
                let [lo, hi] = nibbles(half_word(base, l, h), t);
                dot::<VNNI>(&mut t0[h], lo, d00, hi, d01);
                dot::<VNNI>(&mut t1[h], lo, d10, hi, d11);
            }
        }
        let mut sums = [zero; 2];
        for (h, s) in sums.iter_mut().enumerate() {
            *s = _mm256_add_epi32(both(t0[h]), _mm256_slli_epi32::<8>(both(t1[h])));
        }
        sums
    }
}

/// `two_digit_block` by VPMADDUBSW: a word's i16 pair sums stay within 2 * 2 * 24 * 128, so two words add in i16 before VPMADDWD widens them.
#[inline(always)]
unsafe fn two_digit_block_pairs(ch: &ChunkDigits, b: usize, base: *const u8, t: __m256i) -> [__m256i; 2] {
    // SAFETY: the callers enable AVX2; the chunk holds the block's words.
    unsafe {
        let zero = _mm256_setzero_si256();
        let ones = _mm256_set1_epi16(1);
        // t32[p][h]: digit p of half h.
        let mut t32 = [[_mm256_set1_epi32(ch.block_offset[4 * b]); 2], [zero; 2]];
        for two in [4 * b, 4 * b + 2] {
            let mut t16 = [[zero; 2]; 2];
            for l in two..two + 2 {
                let d: [[__m256i; 2]; 2] = [
                    [digit_word(ch, 0, 0, l), digit_word(ch, 0, 1, l)],
                    [digit_word(ch, 1, 0, l), digit_word(ch, 1, 1, l)],
                ];
                for h in 0..2 {
                    let [lo, hi] = nibbles(half_word(base, l, h), t);
                    for (t16, d) in t16.iter_mut().zip(&d) {
                        let word = _mm256_add_epi16(_mm256_maddubs_epi16(lo, d[0]), _mm256_maddubs_epi16(hi, d[1]));
                        t16[h] = _mm256_add_epi16(t16[h], word);
                    }
                }
            }
            for (t32, t16) in t32.iter_mut().zip(&t16) {
                for (t32, &t16) in t32.iter_mut().zip(t16) {
                    *t32 = _mm256_add_epi32(*t32, _mm256_madd_epi16(t16, ones));
                }
            }
        }
        let mut sums = [zero; 2];
        for (h, s) in sums.iter_mut().enumerate() {
            *s = _mm256_add_epi32(t32[0][h], _mm256_slli_epi32::<8>(t32[1][h]));
        }
        sums
    }
}

/// Lane l's exact integer sum per row of `d` (half a word) over three digits.
#[inline(always)]
unsafe fn three_digit_lane<const VNNI: u8>(ch: &ChunkDigits, l: usize, d: __m256i, t: __m256i) -> __m256 {
    // SAFETY: the callers enable AVX2 and `VNNI`'s features.
    unsafe {
        let [lo, hi] = nibbles(d, t);
        let mut s = [
            _mm256_set1_epi32(ch.offset[l]),
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
        ];
        for (p, s) in s.iter_mut().enumerate() {
            *s = dot_one::<VNNI>(*s, lo, digit_word(ch, p, 0, l), hi, digit_word(ch, p, 1, l));
        }
        let low = _mm256_add_epi32(s[0], _mm256_slli_epi32::<8>(s[1]));
        _mm256_cvtepi32_ps(_mm256_add_epi32(low, _mm256_slli_epi32::<16>(s[2])))
    }
}

/// Lane l per row of `d` by FMA in element order (`x[q][l]` element 8l + q), as the AVX-512 kernel's FMA lanes.
#[inline(always)]
unsafe fn fma_lane(x: &[[f32; 16]; 8], l: usize, d: __m256i, mag: __m256) -> __m256 {
    // SAFETY: the callers enable AVX2 and FMA.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for (q, x) in x.iter().enumerate() {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(x[l]), nibble8(d, q, mag), acc);
        }
        acc
    }
}

/// The 16 outputs of group `g` of `p` against one activation row (`a` its values, `sa` its scales, `dg` its digits) into `dst`, 8 rows a half.
#[inline(always)]
unsafe fn group_body<const VNNI: u8>(a: &[u16], sa: &[f32], dg: &Digits, p: &Packed, g: usize, dst: &mut [f32]) {
    let chunks = p.k / CHUNK;
    assert!(sa.len() >= chunks && a.len() >= p.k && dg.chunks.len() >= chunks);
    assert!((g + 1) * ROWS <= p.n && dst.len() == ROWS);
    let (w, codes) = (&p.bytes[g * ROWS * p.k / 2..], &p.codes[g * ROWS * p.k / BLOCK..]);
    // SAFETY: the callers enable AVX2, FMA and `VNNI`'s features; the group's chunks lie inside the weight (asserted above).
    unsafe {
        let t = _mm256_loadu_si256(WEIGHT_TABLE.as_ptr() as *const __m256i);
        let mag = _mm256_loadu_ps(e2m1::TABLE.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 2];
        for (c, &sa) in sa.iter().enumerate().take(chunks) {
            let base = w.as_ptr().add(c * GROUP * CHUNK_BYTES);
            let ch = &dg.chunks[c];
            // inner[h][b]: block b of half h's 8 rows.
            let mut inner = [[_mm256_setzero_ps(); 4]; 2];
            if dg.exact[c] && !dg.three[c] {
                for b in 0..4 {
                    let sums = two_digit_block::<VNNI>(ch, b, base, t);
                    for (inner, sum) in inner.iter_mut().zip(sums) {
                        inner[b] = _mm256_cvtepi32_ps(sum);
                    }
                }
            } else {
                let x = match dg.exact[c] {
                    true => None,
                    false => Some(values(&a[c * CHUNK..(c + 1) * CHUNK])),
                };
                for (h, inner) in inner.iter_mut().enumerate() {
                    for (b, inner) in inner.iter_mut().enumerate() {
                        let mut l4 = [_mm256_setzero_ps(); 4];
                        for (i, v) in l4.iter_mut().enumerate() {
                            let (l, d) = (4 * b + i, half_word(base, 4 * b + i, h));
                            *v = match &x {
                                None => three_digit_lane::<VNNI>(ch, l, d, t),
                                Some(x) => fma_lane(x, l, d, mag),
                            };
                        }
                        *inner = _mm256_add_ps(_mm256_add_ps(l4[0], l4[2]), _mm256_add_ps(l4[1], l4[3]));
                    }
                }
            }
            // An exact chunk's inner sums count units of 2^(s - 10), which the scale takes on.
            let unit = match dg.exact[c] {
                true => f32::from_bits(((dg.shift[c] + 117) as u32) << 23),
                false => 1.0,
            };
            let folded = folded_scale(sa, unit, p.range);
            for (h, (acc, inner)) in acc.iter_mut().zip(&inner).enumerate() {
                let cw = _mm256_loadu_si256(codes.as_ptr().add(c * 64 + 32 * h) as *const __m256i);
                for (b, &inner) in inner.iter().enumerate() {
                    let sw = plain_scale(cw, b);
                    *acc = match folded {
                        Some(base) => {
                            let bits = _mm256_add_epi32(_mm256_castps_si256(sw), _mm256_set1_epi32(base));
                            _mm256_fmadd_ps(inner, _mm256_castsi256_ps(bits), *acc)
                        }
                        None => _mm256_fmadd_ps(
                            _mm256_mul_ps(inner, _mm256_set1_ps(unit)),
                            _mm256_mul_ps(_mm256_set1_ps(sa), sw),
                            *acc,
                        ),
                    };
                }
            }
        }
        _mm256_storeu_ps(dst.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(dst.as_mut_ptr().add(HALF), acc[1]);
    }
}

/// A chunk's activations as floats, `x[q][l]` element 8l + q.
fn values(a: &[u16]) -> [[f32; 16]; 8] {
    std::array::from_fn(|q| std::array::from_fn(|l| f32::from_bits((a[LAYOUT.position(8 * l + q)] as u32) << 16)))
}

/// An entry of `group_body::<VNNI>` compiled with `features`, which cover what that body needs.
macro_rules! group_entry {
    ($(#[$doc:meta])* $name:ident, $features:literal, $vnni:literal) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(a: &[u16], sa: &[f32], dg: &Digits, p: &Packed, g: usize, dst: &mut [f32]) {
            // SAFETY: the features enabled here are the body's.
            unsafe { group_body::<$vnni>(a, sa, dg, p, g, dst) }
        }
    };
}

group_entry!(
    /// Group `g`'s 16 outputs by VPMADDUBSW.
    group_avx2,
    "avx2,fma",
    0
);
group_entry!(
    /// `group_avx2` by AVX-VNNI's VPDPBUSD: the same bits.
    group_avx2_vnni,
    "avx2,fma,avxvnni",
    1
);
group_entry!(
    /// `group_avx2` by AVX-512 VNNI's 256-bit VPDPBUSD: the same bits.
    group_avx2_vnni512,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    2
);

/// The AVX2 group kernel in the form this CPU runs fastest (`exact2::vnni_form`); the caller has checked AVX2 and FMA.
pub(super) fn form() -> GroupFn<Digits> {
    match super::exact2::vnni_form() {
        1 => group_avx2_vnni,
        2 => group_avx2_vnni512,
        _ => group_avx2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::rng::Rng;
    use crate::cpu::{CpuLaunch, SimdPath};
    use crate::faults::Faults;
    use crate::gemm::PAIRS;
    use crate::gemm::reference::{activations, scale_codes_within};
    use crate::mxfp4_gemm::exact2::{digits, rows_avx2};
    use crate::mxfp4_gemm::testdata::{bytes, layout, rounding_lanes};
    use crate::mxfp4_gemm::{mxfp4_gemm, mxfp4_gemm_packed};
    use tensorfold_formats::{e4m3, e8m0};

    fn avx2() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// The forms this CPU runs, by name.
    fn forms() -> Vec<(&'static str, GroupFn<Digits>)> {
        let mut out: Vec<(&str, GroupFn<Digits>)> = vec![("VPMADDUBSW", group_avx2)];
        if is_x86_feature_detected!("avxvnni") {
            out.push(("AVX-VNNI", group_avx2_vnni));
        }
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
        {
            out.push(("AVX-512 VNNI", group_avx2_vnni512));
        }
        out
    }

    /// 16 packed rows `w` (codes `s`) against `values` (chunk scales `sa`) by every form, each against the row layout's FMA chain; returns (exact chunks, three-digit chunks).
    fn check(values: &[f32], w: &[u8], s: &[u8], sa: &[f32]) -> (usize, usize) {
        let (k, a) = (values.len(), layout(values));
        let (chunks, blocks) = (k / CHUNK, k / BLOCK);
        let p = Packed::new(w, s, ROWS, k).expect("one group");
        let swt: Vec<f32> = (0..blocks * GROUP)
            .map(|i| e8m0::TABLE[s[(i % GROUP) * blocks + i / GROUP] as usize])
            .collect();
        let rows: [&[u8]; PAIRS] = std::array::from_fn(|j| &w[j * k / 2..][..k / 2]);
        // SAFETY: the callers check AVX2 and FMA; each form runs only where detected.
        unsafe {
            let dg = digits(&a, chunks);
            let want = rows_avx2(&a, sa, None, &swt, false, &rows, k, 1024).map(f32::to_bits);
            for (name, form) in forms() {
                let mut got = [f32::NAN; ROWS];
                form(&a, sa, &dg, &p, 0, &mut got);
                assert_eq!(got.map(f32::to_bits), want, "{name}");
            }
            let exact = (0..chunks).filter(|&c| dg.exact[c]).count();
            (exact, (0..chunks).filter(|&c| dg.exact[c] && dg.three[c]).count())
        }
    }

    #[test]
    fn every_avx2_form_gives_the_fma_chains_bits() {
        if !avx2() {
            eprintln!("skipped: this CPU lacks AVX2 or FMA, which the AVX2 packed kernel needs");
            return;
        }
        let k = 1024;
        let sa: Vec<f32> = (0..k / CHUNK).map(|c| 2f32.powi(c as i32 % 5 - 2)).collect();
        let codes = |seed| -> Vec<u8> { bytes(seed, ROWS * k / BLOCK).iter().map(|b| 118 + b % 16).collect() };
        for seed in 1..4 {
            // Every finite e4m3 code: chunks of two digits and of three.
            let values: Vec<f32> = bytes(seed, k).iter().map(|&c| e4m3::TABLE[c as usize & 0xF7]).collect();
            let (exact, three) = check(&values, &bytes(seed + 100, ROWS * k / 2), &codes(seed + 200), &sa);
            assert!(
                exact == k / CHUNK && three > 0,
                "seed {seed}: exact {exact}, three {three}"
            );
        }
        // Exponent fields 4 to 15: every A a multiple of 8, two digits once shifted.
        let code = |c: u8| match (c & 0x87) | (((c >> 3) % 12 + 4) << 3) {
            0x7F | 0xFF => 0x7E,
            code => code,
        };
        let values: Vec<f32> = bytes(21, k).iter().map(|&c| e4m3::TABLE[code(c) as usize]).collect();
        assert_eq!(
            check(&values, &bytes(22, ROWS * k / 2), &codes(23), &sa),
            (k / CHUNK, 0)
        );
        // Lanes whose exact sums round at the chain's last step.
        let (values, w) = rounding_lanes(512);
        assert_eq!(check(&values, &w, &codes(24)[..ROWS * 16], &sa[..4]), (4, 4));
    }

    #[test]
    fn two_digit_blocks_at_their_largest_sums_keep_the_chains_bits() {
        if !avx2() {
            eprintln!("skipped: this CPU lacks AVX2 or FMA, which the AVX2 packed kernel needs");
            return;
        }
        // -0.25 (digits -128 and 0) and 60 (0 and 120) against weights of +-6: the widest i16 sums two words give.
        let k = 256;
        let sa = [1.0, 0.5];
        let codes = vec![127u8; ROWS * k / BLOCK];
        for value in [-0.25f32, 60.0] {
            for byte in [0x77u8, 0xFF, 0x7F] {
                let got = check(&vec![value; k], &vec![byte; ROWS * k / 2], &codes, &sa);
                assert_eq!(got, (2, 0), "{value} against {byte:#x}");
            }
        }
    }

    #[test]
    fn avx2_chunks_off_the_grid_and_tiny_scales_keep_the_chains_bits() {
        if !avx2() {
            eprintln!("skipped: this CPU lacks AVX2 or FMA, which the AVX2 packed kernel needs");
            return;
        }
        let k = 512;
        let mut values: Vec<f32> = bytes(11, k).iter().map(|&c| e4m3::TABLE[c as usize & 0x37]).collect();
        // Chunk 1, lane 0: 3072 * 6 then seven 2^-10 products, which the chain drops one by one and one rounding keeps.
        values[CHUNK] = 3072.0;
        values[CHUNK + 1..CHUNK + 8].fill(2f32.powi(-9));
        let mut w = bytes(12, ROWS * k / 2);
        for row in 0..ROWS {
            w[row * k / 2 + CHUNK / 2..][..4].copy_from_slice(&[0x17, 0x11, 0x11, 0x11]);
        }
        let codes: Vec<u8> = bytes(13, ROWS * k / BLOCK).iter().map(|b| 118 + b % 16).collect();
        let sa = [0.75, 1.5, 0.25, 3.0];
        assert_eq!(check(&values, &w, &codes, &sa).0, 3, "chunk 1 takes the FMA lanes");
        // Scales 2^-105 times codes 100 to 115: products of 2^-132 to 2^-117, some subnormal, which a folded scale would not round.
        let tiny = [2f32.powi(-105); 4];
        assert!(folded_scale(tiny[0], 2f32.powi(-10), [100, 115]).is_none());
        let small: Vec<u8> = codes.iter().map(|c| c - 18).collect();
        let plain: Vec<f32> = bytes(14, k).iter().map(|&c| e4m3::TABLE[c as usize & 0x77]).collect();
        assert_eq!(check(&plain, &w, &small, &tiny).0, 4);
        // A NaN activation also leaves the integer path.
        values[3 * CHUNK + 5] = f32::NAN;
        assert_eq!(check(&values, &w, &codes, &sa).0, 2);
    }

    #[test]
    fn avx2_launches_give_the_row_layouts_bits() {
        if !avx2() {
            eprintln!("skipped: this CPU lacks AVX2 or FMA, which the AVX2 packed kernel needs");
            return;
        }
        let launches = [
            CpuLaunch::serial().only(SimdPath::Avx2),
            CpuLaunch {
                threads: 2,
                tile_rows: 1,
                ..CpuLaunch::serial().only(SimdPath::Avx2)
            },
        ];
        for (seed, (rows, n, k)) in [(1, 48, 1024), (5, 32, 384), (3, 16, 512)].into_iter().enumerate() {
            let mut rng = Rng::new(seed as u64 + 40, 0);
            let x = activations(&mut rng, rows, k);
            let w: Vec<u8> = (0..n * k / 2).map(|_| rng.below(256) as u8).collect();
            let s = scale_codes_within(&mut rng, n * k / BLOCK, -8, 3);
            let p = Packed::new(&w, &s, n, k).expect("a packable shape");
            for launch in &launches {
                let (mut got, mut want) = (vec![f32::NAN; rows * n], vec![f32::NAN; rows * n]);
                mxfp4_gemm_packed(&x, &p, &mut got, launch, Faults::NONE);
                mxfp4_gemm(&x, &w, &s, n, k, &mut want, launch, Faults::NONE);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "rows {rows} [{n}, {k}], {launch}");
            }
        }
    }
}
