//! CPU `rope`: cos/sin per row from libm-free f64 (exact angle `pos * inv_freq`), then an FMA rotation in f32.

use crate::cpu::math::sin_cos_f64;
use crate::cpu::{CpuLaunch, SimdPath, par_chunks_mut};
use crate::faults::Faults;

/// Largest `|position|`: `2^20 * inv_freq` stays within `sin_cos_f64`'s exact reduction for `inv_freq <= 1`.
pub const MAX_POSITION: i32 = 1 << 20;

/// Rotates pairs of the last `2 * inv_freq.len()` values of each `head_dim` head by `pos * inv_freq` (minus if `inverse`), in place.
pub fn rope(
    x: &mut [f32],
    positions: &[i32],
    head_dim: usize,
    inv_freq: &[f32],
    inverse: bool,
    launch: &CpuLaunch,
    faults: Faults,
) {
    let rows = positions.len();
    let rope_dim = 2 * inv_freq.len();
    assert!(
        rope_dim > 0 && rope_dim <= head_dim,
        "rope: rope_dim {rope_dim} vs head_dim {head_dim}"
    );
    assert!(
        inv_freq.iter().all(|f| (0.0..=1.0).contains(f)),
        "rope: inv_freq outside [0, 1]"
    );
    if rows == 0 {
        assert!(x.is_empty(), "rope: values without positions");
        return;
    }
    assert_eq!(x.len() % rows, 0, "rope: {} values are not {rows} rows", x.len());
    let row_len = x.len() / rows;
    assert_eq!(
        row_len % head_dim,
        0,
        "rope: row of {row_len} is not whole heads of {head_dim}"
    );
    let tile = launch.tile_rows.min(rows);
    let (skip_last, off_by_one) = (faults.on("skip_last_row"), faults.on("position_off_by_one"));
    let f32_angle = faults.on("angle_f32_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(x, row_len, launch.split_threads(x.len()), |first_row, chunk| {
        let (mut cos, mut sin) = (vec![0f32; rope_dim], vec![0f32; rope_dim]);
        for (tile_idx, tile_rows) in chunk.chunks_mut(tile * row_len).enumerate() {
            for (i, row) in tile_rows.chunks_mut(row_len).enumerate() {
                let r = first_row + tile_idx * tile + i;
                if skip_last && r + 1 == rows {
                    continue;
                }
                let pos = positions[r] + off_by_one as i32;
                assert!(
                    pos.unsigned_abs() <= MAX_POSITION as u32,
                    "rope: position {pos} beyond ±{MAX_POSITION}"
                );
                for (p, &f) in inv_freq.iter().enumerate() {
                    let angle = if f32_angle {
                        (pos as f32 * f) as f64
                    } else {
                        pos as f64 * f as f64
                    };
                    let (s, c) = sin_cos_f64(angle);
                    let s = if inverse { -s as f32 } else { s as f32 };
                    cos[2 * p] = c as f32;
                    cos[2 * p + 1] = c as f32;
                    sin[2 * p] = -s;
                    sin[2 * p + 1] = s;
                }
                for head in row.chunks_exact_mut(head_dim) {
                    rotate(&mut head[head_dim - rope_dim..], &cos, &sin, launch.simd);
                }
            }
        }
    });
}

/// `y[k] = fma(x[k], cos[k], x[k^1] * sin[k])`: the pair rotation with `sin` already signed per lane.
fn rotate(x: &mut [f32], cos: &[f32], sin: &[f32], simd: SimdPath) {
    let done = match simd {
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
            assert!(is_x86_feature_detected!("avx512f"));
            // SAFETY: the feature is present, checked above.
            unsafe { x86::rotate_avx512(x, cos, sin) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: the features are present, checked above.
            unsafe { x86::rotate_avx2(x, cos, sin) }
        }
        _ => 0,
    };
    for k in (done..x.len()).step_by(2) {
        let (x0, x1) = (x[k], x[k + 1]);
        x[k] = x0.mul_add(cos[k], x1 * sin[k]);
        x[k + 1] = x1.mul_add(cos[k + 1], x0 * sin[k + 1]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Swaps the two values of every pair: lanes (1, 0, 3, 2) of each 128-bit lane.
    const SWAP_PAIRS: i32 = 0b10_11_00_01;

    /// Rotates whole 16-value chunks; returns how many values it did.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn rotate_avx512(x: &mut [f32], cos: &[f32], sin: &[f32]) -> usize {
        let full = x.len() / 16 * 16;
        for k in (0..full).step_by(16) {
            // SAFETY: k + 16 <= len of x, cos and sin (equal lengths).
            unsafe {
                let v = _mm512_loadu_ps(x.as_ptr().add(k));
                let swapped = _mm512_permute_ps::<SWAP_PAIRS>(v);
                let prod = _mm512_mul_ps(swapped, _mm512_loadu_ps(sin.as_ptr().add(k)));
                let y = _mm512_fmadd_ps(v, _mm512_loadu_ps(cos.as_ptr().add(k)), prod);
                _mm512_storeu_ps(x.as_mut_ptr().add(k), y);
            }
        }
        full
    }

    /// Rotates whole 8-value chunks; returns how many values it did.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rotate_avx2(x: &mut [f32], cos: &[f32], sin: &[f32]) -> usize {
        let full = x.len() / 8 * 8;
        for k in (0..full).step_by(8) {
            // SAFETY: k + 8 <= len of x, cos and sin (equal lengths).
            unsafe {
                let v = _mm256_loadu_ps(x.as_ptr().add(k));
                let swapped = _mm256_permute_ps::<SWAP_PAIRS>(v);
                let prod = _mm256_mul_ps(swapped, _mm256_loadu_ps(sin.as_ptr().add(k)));
                let y = _mm256_fmadd_ps(v, _mm256_loadu_ps(cos.as_ptr().add(k)), prod);
                _mm256_storeu_ps(x.as_mut_ptr().add(k), y);
            }
        }
        full
    }
}
