//! The AVX-512 MXFP4 GEMV over a thread's columns: each pass's 16 rows come from 16 streams spread over the range.

use std::array::from_fn;
use std::ops::Range;

use tensorfold_formats::e8m0;

use super::cpu::BLOCK;
use super::x86::{decode_scales, rows_avx512};
use crate::gemm::{GROUP, PAIRS};

/// Bytes ahead in each row's stream that a pass asks the cache for.
const AHEAD: usize = 1024;

/// Columns `cols` of one activation row (`a`, scales `sa`) against `w` [n, k/2] with scales [n, k/32], as `rows_avx512` per column.
#[target_feature(enable = "avx512f,avx2")]
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
    for step in 0..span {
        let idx: [usize; PAIRS] = from_fn(|s| (s * span + step).min(len - 1));
        let scale_rows: [&[u8]; GROUP] = from_fn(|s| &w_scale[(cols.start + idx[s]) * blocks..][..blocks]);
        // SAFETY: avx2 is enabled here.
        let done = unsafe { decode_scales(&scale_rows, &mut swt) };
        for kb in done..blocks {
            for (d, r) in swt[kb * GROUP..][..GROUP].iter_mut().zip(&scale_rows) {
                *d = e8m0::TABLE[r[kb] as usize];
            }
        }
        let row = |s: usize| &w[(cols.start + idx[s]) * row_bytes..][..row_bytes];
        // SAFETY: avx512f is enabled here; rows hold k/2 bytes, `rows_avx512` checks the activations and scales.
        let got = unsafe { rows_avx512(a, sa, &swt, 0, PAIRS, &row, k, Some(AHEAD)) };
        for (s, &v) in got.iter().enumerate() {
            if s * span + step < len {
                out[idx[s]] = v;
            }
        }
    }
}
