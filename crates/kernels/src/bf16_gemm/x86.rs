//! AVX-512 and AVX2 tiles of `bf16_gemm`: the portable lane order, bf16 pairs decoded in place (a shift and a mask).

use std::arch::x86_64::*;

use super::cpu::CHUNK;
use crate::gemm::PAIRS;
use crate::gemm::x86::{bf16_pair8, bf16_pair16, hsum8, hsum16, reduce16};

/// Bytes ahead in each weight row that the row streams ask the cache for.
const PREFETCH: usize = 1024;

/// The weight tail past the last whole chunk, zero-padded.
fn tail(w: &[u16], full: usize) -> [u16; CHUNK] {
    let mut pad = [0u16; CHUNK];
    pad[..w.len() - full * CHUNK].copy_from_slice(&w[full * CHUNK..]);
    pad
}

/// Rows `x` (1 or 4) against weight rows `w` (up to 16) into `out[ri * 16 + ci]`.
#[target_feature(enable = "avx512f")]
pub unsafe fn tile_avx512(x: &[&[f32]], w: &[&[u16]], k: usize, out: &mut [f32; 4 * PAIRS]) {
    let (full, chunks) = (k / CHUNK, k.div_ceil(CHUNK));
    assert!(x.iter().all(|r| r.len() >= chunks * CHUNK) && w.iter().all(|r| r.len() == k) && w.len() <= PAIRS);
    if x.len() == 1 {
        // One row: two weight rows streamed at a time, each with its own accumulator.
        let xp = x[0].as_ptr();
        for (pair, ws) in w.chunks(2).enumerate() {
            let mut acc = [_mm512_setzero_ps(); 2];
            for c in 0..full {
                // SAFETY: chunk c is whole in the activations and in every weight row.
                unsafe {
                    let (xe, xo) = (
                        _mm512_loadu_ps(xp.add(c * CHUNK)),
                        _mm512_loadu_ps(xp.add(c * CHUNK + 16)),
                    );
                    for (a, r) in acc.iter_mut().zip(ws) {
                        let p = r.as_ptr().add(c * CHUNK);
                        _mm_prefetch::<_MM_HINT_T0>((p as *const u8).wrapping_add(PREFETCH) as *const i8);
                        let [we, wo] = bf16_pair16(p);
                        *a = _mm512_fmadd_ps(xo, wo, _mm512_fmadd_ps(xe, we, *a));
                    }
                }
            }
            for (j, (a, r)) in acc.iter_mut().zip(ws).enumerate() {
                if full < chunks {
                    let pad = tail(r, full);
                    // SAFETY: the last activation chunk exists; the weights are the padded copy.
                    unsafe {
                        let (xe, xo) = (
                            _mm512_loadu_ps(xp.add(full * CHUNK)),
                            _mm512_loadu_ps(xp.add(full * CHUNK + 16)),
                        );
                        let [we, wo] = bf16_pair16(pad.as_ptr());
                        *a = _mm512_fmadd_ps(xo, wo, _mm512_fmadd_ps(xe, we, *a));
                    }
                }
                out[2 * pair + j] = hsum16(*a);
            }
        }
        return;
    }
    // Four rows: 4 x 4 pairs per pass, the 16 accumulators reduced together.
    for (quad, ws) in w.chunks(4).enumerate() {
        let mut acc = [_mm512_setzero_ps(); 16];
        for c in 0..chunks {
            let mut pads = [[0u16; CHUNK]; 4];
            for ci in 0..4 {
                let r = ws[ci.min(ws.len() - 1)];
                let wp = if c < full {
                    // SAFETY: chunk c is whole.
                    unsafe { r.as_ptr().add(c * CHUNK) }
                } else {
                    pads[ci] = tail(r, full);
                    pads[ci].as_ptr()
                };
                // SAFETY: 32 values behind wp; chunk c lies inside every activation row.
                unsafe {
                    let [we, wo] = bf16_pair16(wp);
                    for ri in 0..4 {
                        let xp = x[ri].as_ptr().add(c * CHUNK);
                        let a = &mut acc[ri * 4 + ci];
                        *a = _mm512_fmadd_ps(
                            _mm512_loadu_ps(xp.add(16)),
                            wo,
                            _mm512_fmadd_ps(_mm512_loadu_ps(xp), we, *a),
                        );
                    }
                }
            }
        }
        let mut sums = [0f32; 16];
        // SAFETY: 16 floats.
        unsafe { _mm512_storeu_ps(sums.as_mut_ptr(), reduce16(acc)) };
        for ri in 0..4 {
            for ci in 0..ws.len() {
                out[ri * PAIRS + 4 * quad + ci] = sums[ri * 4 + ci];
            }
        }
    }
}

/// Rows `x` (1 or 4) against weight rows `w`, one pair at a time, 8 lanes per half.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn tile_avx2(x: &[&[f32]], w: &[&[u16]], k: usize, out: &mut [f32; 4 * PAIRS]) {
    let (full, chunks) = (k / CHUNK, k.div_ceil(CHUNK));
    assert!(x.iter().all(|r| r.len() >= chunks * CHUNK) && w.iter().all(|r| r.len() == k) && w.len() <= PAIRS);
    for (ri, xr) in x.iter().enumerate() {
        for (ci, r) in w.iter().enumerate() {
            let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for c in 0..chunks {
                let pad;
                let wp = if c < full {
                    // SAFETY: chunk c is whole.
                    unsafe { r.as_ptr().add(c * CHUNK) }
                } else {
                    pad = tail(r, full);
                    pad.as_ptr()
                };
                // SAFETY: 32 values behind wp; chunk c lies inside the activation row.
                unsafe {
                    let xp = xr.as_ptr().add(c * CHUNK);
                    let [wel, wol] = bf16_pair8(wp);
                    let [weh, woh] = bf16_pair8(wp.add(16));
                    lo = _mm256_fmadd_ps(
                        _mm256_loadu_ps(xp.add(16)),
                        wol,
                        _mm256_fmadd_ps(_mm256_loadu_ps(xp), wel, lo),
                    );
                    hi = _mm256_fmadd_ps(
                        _mm256_loadu_ps(xp.add(24)),
                        woh,
                        _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(8)), weh, hi),
                    );
                }
            }
            out[ri * PAIRS + ci] = hsum8(_mm256_add_ps(lo, hi));
        }
    }
}
