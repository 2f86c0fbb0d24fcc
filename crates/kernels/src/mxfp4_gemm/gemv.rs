//! The AVX-512 and AVX2 MXFP4 GEMVs over a thread's columns: each pass's 16 rows come from 16 streams spread over the range.

use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
use std::array::from_fn;
use std::cell::Cell;
use std::ops::Range;

use tensorfold_formats::e8m0;

use super::cpu::{BLOCK, CHUNK};
use super::x86::{decode_scales, decode_scales_plain, plain_codes, plain_codes_avx2, rows_avx512};
use super::{exact, exact2};
use crate::cpu::halves_512;
use crate::gemm::{GROUP, PAIRS};

/// Passes ahead that each stream's scale row is asked for.
const SCALES_AHEAD: usize = 2;

/// Bytes ahead in each row's stream that the AVX-512 FMA lanes ask L1 for, except on CPUs that split 512-bit operations.
const AHEAD: usize = 1024;

/// `AHEAD` for the exact integer lanes, whose digit planes share L1 with the 16 streams' lines.
const AHEAD_EXACT: usize = 512;

/// Bytes ahead in each row's stream that the AVX-512 GEMV asks L2 for on CPUs that split 512-bit operations (Zen 4).
const AHEAD_L2: usize = 4096;

/// `AHEAD` for the AVX2 GEMV, whose 16 streams' lines then stay in L1 beside the digit planes until read.
const AHEAD_AVX2: usize = 512;

/// Bytes of a page: streams a whole number of pages apart would all cross into new pages on the same pass.
const PAGE: usize = 4096;

/// Stream s's columns of `len`: a sixteenth each, stream s starting s % (rows per page) rows later, so the streams cross pages on different passes.
fn streams(len: usize, row_bytes: usize) -> [Range<usize>; PAIRS] {
    let span = len.div_ceil(PAIRS);
    let per_page = (PAGE / row_bytes.max(1)).max(1);
    // With span >= per_page the starts still ascend.
    let lag = |s: usize| if span >= per_page { s % per_page } else { 0 };
    let start = |s: usize| if s == PAIRS { len } else { (s * span + lag(s)).min(len) };
    from_fn(|s| start(s)..start(s + 1))
}

/// Passes of 16 columns over `cols` of `w` [n, k/2] (scales [n, k/32]), each taken from the 16 streams: `decode` fills the pass's scales from its scale rows (returning how many blocks it filled), `rows` computes its 16 outputs; `SCALES_L2` asks for the scale rows ahead into L2 rather than L1.
fn streamed<const SCALES_L2: bool>(
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
    decode: impl Fn(&[&[u8]; GROUP], &mut [f32]) -> usize,
    rows: impl Fn(&[f32], &[&[u8]; PAIRS]) -> [f32; PAIRS],
) {
    let (blocks, row_bytes) = (k / BLOCK, k / 2);
    let len = cols.len();
    assert!(len > 0 && out.len() == len && cols.end * row_bytes <= w.len() && cols.end * blocks <= w_scale.len());
    // Slot s of a pass reads stream s's columns in order; a stream shorter than the longest repeats a column unstored.
    let streams = streams(len, row_bytes);
    let passes = streams.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut swt = vec![0f32; blocks * GROUP];
    for step in 0..passes {
        let idx: [usize; PAIRS] = from_fn(|s| match streams[s].is_empty() {
            true => len - 1,
            false => (streams[s].start + step).min(streams[s].end - 1),
        });
        let scale_rows: [&[u8]; GROUP] = from_fn(|s| &w_scale[(cols.start + idx[s]) * blocks..][..blocks]);
        // The scale rows SCALES_AHEAD passes on, one cache line at a time (a prefetch never faults).
        for r in &scale_rows {
            let next = r.as_ptr().wrapping_add(SCALES_AHEAD * blocks);
            for line in (0..blocks).step_by(64) {
                let at = next.wrapping_add(line) as *const i8;
                // SAFETY: SSE is part of x86_64.
                unsafe {
                    match SCALES_L2 {
                        true => _mm_prefetch::<_MM_HINT_T1>(at),
                        false => _mm_prefetch::<_MM_HINT_T0>(at),
                    }
                }
            }
        }
        for kb in decode(&scale_rows, &mut swt)..blocks {
            for (d, r) in swt[kb * GROUP..][..GROUP].iter_mut().zip(&scale_rows) {
                *d = e8m0::TABLE[r[kb] as usize];
            }
        }
        let got = rows(&swt, &from_fn(|s| &w[(cols.start + idx[s]) * row_bytes..][..row_bytes]));
        for (s, &v) in got.iter().enumerate() {
            if streams[s].start + step < streams[s].end {
                out[idx[s]] = v;
            }
        }
    }
}

/// Columns `cols` of one activation row (`a`, scales `sa`) against `w` [n, k/2] with scales [n, k/32], as `rows_avx512` per column.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub unsafe fn gemv_avx512(
    a: &[u16],
    sa: &[f32],
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: `available` checked the features `planes` needs.
    let planes = exact::available().then(|| unsafe { exact::planes(a, k.div_ceil(CHUNK)) });
    let planes = planes.filter(|p| p.exact_chunks() > 0);
    // Whether this pass's scales are `plain_codes`' words, which only `rows_exact` reads.
    let coded = Cell::new(false);
    // SAFETY: the callers checked avx512f, avx512bw and avx2; the decoders check what they read.
    let decode = |rows: &[&[u8]; GROUP], swt: &mut [f32]| unsafe {
        coded.set(planes.is_some() && plain_codes(rows, swt));
        if coded.get() {
            return rows[0].len();
        }
        match decode_scales_plain(rows, swt) {
            0 => decode_scales(rows, swt),
            plain => plain,
        }
    };
    // Zen 4 streams the 16 rows best with L2 prefetches and lets its hardware fill L1; Intel with L1 prefetches.
    let zen = halves_512();
    // SAFETY: as above; `planes` exist only where `rows_exact` runs, and both kernels check what they read.
    let rows = |swt: &[f32], rows: &[&[u8]; PAIRS]| unsafe {
        match &planes {
            Some(p) if zen => exact::rows_exact::<true>(a, sa, p, swt, coded.get(), rows, k, AHEAD_L2),
            Some(p) => exact::rows_exact::<false>(a, sa, p, swt, coded.get(), rows, k, AHEAD_EXACT),
            None => rows_avx512(a, sa, swt, 0, PAIRS, &|j| rows[j], k, Some(AHEAD)),
        }
    };
    match zen {
        true => streamed::<true>(w, w_scale, k, cols, out, decode, rows),
        false => streamed::<false>(w, w_scale, k, cols, out, decode, rows),
    }
}

/// Columns `cols` of one activation row against `w` on AVX2, as `pairs_avx2` per column: integer lanes where the chunk allows, 16 streams a pass.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn gemv_avx2(
    a: &[u16],
    sa: &[f32],
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: avx2 and fma are enabled here.
    let digits = unsafe { exact2::digits(a, k / CHUNK) };
    let digits = Some(&digits).filter(|d| d.exact_chunks() > 0);
    // Whether this pass's scales are `plain_codes_avx2`' words.
    let coded = Cell::new(false);
    // SAFETY: the callers checked avx2 and fma; the decoders check what they read.
    let decode = |rows: &[&[u8]; GROUP], swt: &mut [f32]| unsafe {
        coded.set(plain_codes_avx2(rows, swt));
        match coded.get() {
            true => rows[0].len(),
            false => decode_scales(rows, swt),
        }
    };
    let vnni = exact2::vnni_form();
    // SAFETY: as above, AVX-VNNI or AVX-512 VL and VNNI checked where used; the kernels check what they read.
    let rows = |swt: &[f32], rows: &[&[u8]; PAIRS]| unsafe {
        match vnni {
            1 => exact2::rows_avx2_vnni(a, sa, digits, swt, coded.get(), rows, k, AHEAD_AVX2),
            2 => exact2::rows_avx2_vnni512(a, sa, digits, swt, coded.get(), rows, k, AHEAD_AVX2),
            _ => exact2::rows_avx2(a, sa, digits, swt, coded.get(), rows, k, AHEAD_AVX2),
        }
    };
    // The 16 streams' lines and the digit planes fill L1; scale rows wait in L2.
    streamed::<true>(w, w_scale, k, cols, out, decode, rows);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(rows: &[Vec<u8>], plain: bool) -> (usize, Vec<u32>) {
        let rows: [&[u8]; GROUP] = from_fn(|j| &rows[j][..]);
        let mut swt = vec![0f32; rows[0].len() * GROUP];
        // SAFETY: the callers check avx512f, avx512bw and avx2.
        let done = unsafe {
            if plain {
                decode_scales_plain(&rows, &mut swt)
            } else {
                decode_scales(&rows, &mut swt)
            }
        };
        (done, swt.iter().map(|s| s.to_bits()).collect())
    }

    #[test]
    fn streams_cover_every_column_once_and_cross_pages_apart() {
        for (len, row_bytes) in [
            (1, 2048),
            (17, 2048),
            (40, 1024),
            (1024, 2048),
            (2048, 1024),
            (1000, 4096),
            (300, 528),
        ] {
            let st = streams(len, row_bytes);
            let cols: Vec<usize> = st.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(cols, (0..len).collect::<Vec<_>>(), "len {len} row bytes {row_bytes}");
            assert!(st.iter().all(|r| r.len() <= len.div_ceil(PAIRS) + 1));
        }
        // Rows of 2 KB: half the streams start an odd number of rows in, so half cross into a new page per pass.
        let st = streams(1024, 2048);
        assert_eq!(st.iter().filter(|r| r.start % 2 == 1).count(), PAIRS / 2);
        let st = streams(2048, 1024);
        assert!((0..4).all(|m| st.iter().filter(|r| r.start % 4 == m).count() == PAIRS / 4));
    }

    /// `simd`'s GEMV against the portable bits on [40, 2048] (64 scale codes a row, so plain passes run coded) with scale codes `code(byte)`, then with `edges` in column 3, whose pass decodes its scales.
    fn coded_and_decoded_match_portable(simd: crate::cpu::SimdPath, code: impl Fn(u8) -> u8, edges: &[u8]) {
        use crate::Faults;
        use crate::cpu::{CpuLaunch, SimdPath};
        use crate::mxfp4_gemm::testdata::bytes;
        let (n, k) = (40, 2048);
        let x: Vec<f32> = bytes(1, k).iter().map(|&b| b as f32 / 64.0 - 2.0).collect();
        let w = bytes(2, n * k / 2);
        let mut s: Vec<u8> = bytes(3, n * k / BLOCK).into_iter().map(code).collect();
        let run = |s: &[u8], simd| {
            let mut out = vec![0f32; n];
            let launch = CpuLaunch::serial().only(simd);
            crate::mxfp4_gemm::mxfp4_gemm(&x, &w, s, n, k, &mut out, &launch, Faults::NONE);
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(run(&s, simd), run(&s, SimdPath::Portable), "every pass coded");
        for (i, &e) in edges.iter().enumerate() {
            s[3 * k / BLOCK + 9 + 31 * i] = e;
        }
        assert_eq!(run(&s, simd), run(&s, SimdPath::Portable), "one pass decoded");
    }

    #[test]
    fn the_gemv_gives_the_portable_bits_with_coded_and_decoded_scales() {
        use crate::cpu::SimdPath;
        if SimdPath::available().contains(&SimdPath::Avx512) {
            coded_and_decoded_match_portable(SimdPath::Avx512, |b| 118 + b % 8, &[0]);
        }
    }

    #[test]
    fn the_avx2_gemv_gives_the_portable_bits_with_coded_and_decoded_scales() {
        use crate::cpu::SimdPath;
        if SimdPath::available().contains(&SimdPath::Avx2) {
            coded_and_decoded_match_portable(SimdPath::Avx2, |b| 1 + b % 254, &[0, 255]);
        }
    }

    /// A `plain_codes` form on rows of `len` codes: each column's four codes a word per chunk; rows of `short` codes and codes 0 or 255 at `edges` refused.
    fn plain_codes_check(
        code: unsafe fn(&[&[u8]; GROUP], &mut [f32]) -> bool,
        len: usize,
        short: usize,
        edges: &[usize],
    ) {
        let words = |rows: &[Vec<u8>]| {
            let refs: [&[u8]; GROUP] = from_fn(|j| &rows[j][..]);
            let mut codes = vec![0f32; rows[0].len() * GROUP / 4];
            // SAFETY: the callers checked the features of `code`.
            let plain = unsafe { code(&refs, &mut codes) };
            plain.then(|| codes.iter().map(|c| c.to_bits()).collect::<Vec<_>>())
        };
        let mut rows: Vec<Vec<u8>> = (0..GROUP)
            .map(|j| (0..len).map(|b| (1 + (j * 37 + b * 11) % 254) as u8).collect())
            .collect();
        let got = words(&rows).expect("codes 1..254 in whole vectors are plain");
        for (j, r) in rows.iter().enumerate() {
            for c in 0..len / 4 {
                let want = u32::from_le_bytes(r[4 * c..][..4].try_into().expect("four codes"));
                assert_eq!(got[16 * c + j], want, "column {j} chunk {c}");
            }
        }
        let cut: Vec<Vec<u8>> = rows.iter().map(|r| r[..short].to_vec()).collect();
        assert_eq!(words(&cut), None, "{short} codes a row are not whole vectors");
        for (&at, code) in edges.iter().zip([0u8, 255].into_iter().cycle()) {
            let keep = rows[9][at];
            rows[9][at] = code;
            assert_eq!(words(&rows), None, "code {code} at {at} must fall back");
            rows[9][at] = keep;
        }
    }

    #[test]
    fn avx2_plain_codes_are_each_columns_four_codes_a_word_or_decline() {
        if is_x86_feature_detected!("avx2") {
            plain_codes_check(plain_codes_avx2, 64, 48, &[61, 61]);
        }
    }

    #[test]
    fn plain_codes_are_each_columns_four_codes_a_word_or_decline() {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
            plain_codes_check(plain_codes, 128, 96, &[70, 127]);
        }
    }

    #[test]
    fn avx2_scale_decode_matches_the_table_in_plain_groups_and_beside_edge_codes() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rows: Vec<Vec<u8>> = (0..GROUP)
            .map(|j| (0..64).map(|b| (1 + (j * 37 + b * 11) % 254) as u8).collect())
            .collect();
        // Blocks 16..31 and 48..63 hold a 0 and a 255; blocks 0..15 and 32..47 only plain codes.
        rows[3][20] = 0;
        rows[12][50] = 255;
        let rows_ref: [&[u8]; GROUP] = from_fn(|j| &rows[j][..]);
        let mut swt = vec![0f32; 64 * GROUP];
        // SAFETY: avx2 was checked above.
        assert_eq!(unsafe { decode_scales(&rows_ref, &mut swt) }, 64);
        for (j, r) in rows.iter().enumerate() {
            for (kb, &c) in r.iter().enumerate() {
                assert_eq!(
                    swt[kb * GROUP + j].to_bits(),
                    e8m0::TABLE[c as usize].to_bits(),
                    "row {j} block {kb} code {c}"
                );
            }
        }
    }

    #[test]
    fn plain_scale_decode_matches_the_table_or_declines() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
            return;
        }
        let mut rows: Vec<Vec<u8>> = (0..GROUP)
            .map(|j| (0..128).map(|b| (1 + (j * 37 + b * 11) % 254) as u8).collect())
            .collect();
        let want = decoded(&rows, false);
        assert_eq!(want.0, 128);
        for (j, r) in rows.iter().enumerate() {
            for (kb, &c) in r.iter().enumerate() {
                assert_eq!(want.1[kb * GROUP + j], e8m0::TABLE[c as usize].to_bits());
            }
        }
        assert_eq!(decoded(&rows, true), want);
        for code in [0u8, 255] {
            rows[5][77] = code;
            assert_eq!(decoded(&rows, true).0, 0, "code {code} must fall back");
        }
    }
}
