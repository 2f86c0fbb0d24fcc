//! AVX-512 act_quant of whole 128-value blocks: the vector round trip, then a permute network into the layout's order.

use std::arch::x86_64::*;
use std::array::from_fn;
use std::sync::OnceLock;

use super::act::{ACT_BLOCK, Layout};
use crate::cpu::quant_simd::e4m3_trip128;

/// Output vector i, value j: element `idx[i][j]` of elements 0..63, or of 64..127 where bit j of `high[i]` is set.
pub(super) struct Place {
    idx: [[u16; 32]; 4],
    high: [u32; 4],
}

/// Networks by values per lane, built on first use.
static NETS: [OnceLock<Option<Place>>; 9] = [const { OnceLock::new() }; 9];

impl Place {
    /// The network for `layout`, where its chunks tile a block and the CPU has AVX-512 F and BW.
    pub(super) fn get(layout: &Layout) -> Option<&'static Place> {
        NETS.get(layout.per_lane)?.get_or_init(|| Place::new(layout)).as_ref()
    }

    fn new(layout: &Layout) -> Option<Place> {
        let fits = ACT_BLOCK.is_multiple_of(16 * layout.per_lane);
        if !(fits && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
            return None;
        }
        let mut p = Place {
            idx: [[0; 32]; 4],
            high: [0; 4],
        };
        for e in 0..ACT_BLOCK {
            let pos = layout.position(e);
            p.idx[pos / 32][pos % 32] = (e % 64) as u16;
            if e >= 64 {
                p.high[pos / 32] |= 1 << (pos % 32);
            }
        }
        Some(p)
    }

    /// Block `x` quantised and decoded as `Fp8Rows::quantise` stores it into `out`; its scale, or `None` (nothing written) where a value is not finite.
    pub(super) fn block(&self, x: &[f32], value_factor: f32, out: &mut [u16]) -> Option<f32> {
        assert!(x.len() == ACT_BLOCK && out.len() == ACT_BLOCK);
        // SAFETY: `new` checked the features; both slices hold a block (asserted).
        unsafe { self.block_avx512(x, value_factor, out) }
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn block_avx512(&self, x: &[f32], value_factor: f32, out: &mut [u16]) -> Option<f32> {
        // SAFETY: x holds 128 values (asserted by the caller).
        let (y, s) = unsafe { e4m3_trip128(x) }?;
        let (inv, vf) = (_mm512_set1_ps(1.0 / s), _mm512_set1_ps(value_factor));
        let bits: [__m512i; 8] = from_fn(|m| _mm512_castps_si512(_mm512_mul_ps(_mm512_mul_ps(y[m], inv), vf)));
        // Value j of e[i]: the bf16 (high half) of element 32i + j.
        let odd: [u16; 32] = from_fn(|j| 2 * j as u16 + 1);
        // SAFETY: 32 u16.
        let odd = unsafe { _mm512_loadu_si512(odd.as_ptr() as *const __m512i) };
        let e: [__m512i; 4] = from_fn(|i| _mm512_permutex2var_epi16(bits[2 * i], odd, bits[2 * i + 1]));
        for (i, (idx, &high)) in self.idx.iter().zip(&self.high).enumerate() {
            // SAFETY: 32 u16 of idx; out holds 128 (asserted).
            unsafe {
                let idx = _mm512_loadu_si512(idx.as_ptr() as *const __m512i);
                let lo = _mm512_permutex2var_epi16(e[0], idx, e[1]);
                let hi = _mm512_permutex2var_epi16(e[2], idx, e[3]);
                let v = _mm512_mask_blend_epi16(high, lo, hi);
                _mm512_storeu_si512(out.as_mut_ptr().add(32 * i) as *mut __m512i, v);
            }
        }
        Some(s)
    }
}
