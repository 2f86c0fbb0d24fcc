//! The AVX-512 FP8 GEMV over a thread's columns: four weight rows a quarter of the range apart per pass, so four pages stream at once.

use std::arch::x86_64::*;
use std::array::from_fn;
use std::ops::Range;

use tensorfold_formats::e8m0;

use super::cpu::BLOCK;
use super::x86::{TO_TOP, block_ptrs, block4, prefetch};
use crate::gemm::x86::reduce4;

/// Bytes ahead in each of the four streams that a pass asks the cache for.
const AHEAD: usize = 2048;

/// Columns `cols` of one activation row (`a`, block scales `sa`) against `w` [n, k] with scales [ceil(n/128), ceil(k/128)], as `rows_avx512` per column.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn gemv_avx512(
    a: &[u16],
    sa: &[f32],
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let (full, blocks) = (k / BLOCK, k.div_ceil(BLOCK));
    let len = cols.len();
    assert!(len > 0 && out.len() == len && a.len() >= blocks * BLOCK && sa.len() >= blocks);
    assert!(cols.end * k <= w.len() && w_scale.len() >= cols.end.div_ceil(BLOCK) * blocks);
    // SAFETY: each load reads one 64-byte static row.
    let top = [0, 1, 2].map(|p| unsafe { _mm512_loadu_si512(TO_TOP[p].as_ptr() as *const __m512i) });
    let quarter = len.div_ceil(4);
    // Stream j's decoded weight scales for its current 128-column block, block-major: swd[4 kb + j].
    let mut swd = vec![0f32; 4 * blocks];
    let mut scale_row = [usize::MAX; 4];
    let mut pad = [[0u8; BLOCK]; 4];
    for t in 0..quarter {
        // Stream j walks columns j * quarter.. in order; a short last stream repeats its last column unstored.
        let idx: [usize; 4] = from_fn(|j| (j * quarter + t).min(len - 1));
        let rows: [&[u8]; 4] = from_fn(|j| &w[(cols.start + idx[j]) * k..][..k]);
        for (j, &i) in idx.iter().enumerate() {
            let sr = (cols.start + i) / BLOCK;
            if sr != scale_row[j] {
                scale_row[j] = sr;
                for (kb, &c) in w_scale[sr * blocks..][..blocks].iter().enumerate() {
                    swd[4 * kb + j] = e8m0::TABLE[c as usize];
                }
            }
        }
        let mut acc = _mm_setzero_ps();
        for (kb, &sa) in sa.iter().enumerate().take(blocks) {
            let wb = block_ptrs(&rows, kb, full, k, &mut pad);
            for p in wb {
                prefetch(p.wrapping_add(AHEAD));
            }
            // SAFETY: block kb of the activations exists; every weight pointer has a whole (or padded) block.
            let inner = reduce4(unsafe { block4(a.as_ptr().add(kb * BLOCK), &wb, &top) });
            // SAFETY: swd holds four scales a block.
            let sw = unsafe { _mm_loadu_ps(swd.as_ptr().add(4 * kb)) };
            acc = _mm_fmadd_ps(inner, _mm_mul_ps(_mm_set1_ps(sa), sw), acc);
        }
        let mut four = [0f32; 4];
        // SAFETY: four floats.
        unsafe { _mm_storeu_ps(four.as_mut_ptr(), acc) };
        for (j, &v) in four.iter().enumerate() {
            if j * quarter + t < len {
                out[idx[j]] = v;
            }
        }
    }
}
