//! The AVX-512 MXFP4 GEMV over a thread's columns: each pass's 16 rows come from 16 streams spread over the range.

use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
use std::array::from_fn;
use std::ops::Range;

use tensorfold_formats::e8m0;

use super::cpu::{BLOCK, CHUNK};
use super::exact;
use super::x86::{decode_scales, decode_scales_plain, rows_avx512};
use crate::gemm::{GROUP, PAIRS};

/// Passes ahead that each stream's scale row is asked for.
const SCALES_AHEAD: usize = 2;

/// Bytes ahead in each row's stream that a pass asks the cache for.
const AHEAD: usize = 1024;

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
    let (blocks, row_bytes) = (k / BLOCK, k / 2);
    let len = cols.len();
    assert!(len > 0 && out.len() == len && cols.end * row_bytes <= w.len() && cols.end * blocks <= w_scale.len());
    // Slot s of a pass reads stream s: columns s * span.. in order; a short last stream repeats its last column unstored.
    let span = len.div_ceil(PAIRS);
    let mut swt = vec![0f32; blocks * GROUP];
    // SAFETY: `available` checked the features `planes` needs.
    let planes = exact::available().then(|| unsafe { exact::planes(a, k.div_ceil(CHUNK)) });
    let planes = planes.filter(|p| p.exact_chunks() > 0);
    for step in 0..span {
        let idx: [usize; PAIRS] = from_fn(|s| (s * span + step).min(len - 1));
        let scale_rows: [&[u8]; GROUP] = from_fn(|s| &w_scale[(cols.start + idx[s]) * blocks..][..blocks]);
        // The scale rows SCALES_AHEAD passes on, one cache line at a time (a prefetch never faults).
        for r in &scale_rows {
            let next = r.as_ptr().wrapping_add(SCALES_AHEAD * blocks);
            for line in (0..blocks).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(line) as *const i8);
            }
        }
        // SAFETY: avx512f, avx512bw and avx2 are enabled here.
        let done = match unsafe { decode_scales_plain(&scale_rows, &mut swt) } {
            0 => unsafe { decode_scales(&scale_rows, &mut swt) },
            plain => plain,
        };
        for kb in done..blocks {
            for (d, r) in swt[kb * GROUP..][..GROUP].iter_mut().zip(&scale_rows) {
                *d = e8m0::TABLE[r[kb] as usize];
            }
        }
        let row = |s: usize| &w[(cols.start + idx[s]) * row_bytes..][..row_bytes];
        // SAFETY: avx512f is enabled here, `planes` exist only where `rows_exact` runs; both check what they read.
        let got = unsafe {
            match &planes {
                Some(p) => exact::rows_exact(a, sa, p, &swt, &from_fn(row), k, AHEAD),
                None => rows_avx512(a, sa, &swt, 0, PAIRS, &row, k, Some(AHEAD)),
            }
        };
        for (s, &v) in got.iter().enumerate() {
            if s * span + step < len {
                out[idx[s]] = v;
            }
        }
    }
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
