//! Activations quantised to FP8 per 128 along K (DeepSeek's act_quant), stored decoded as exact bf16 in SIMD lane order.

use tensorfold_formats::e4m3;

use crate::cpu::SimdPath;
use crate::cpu::quant::{FP8_AMAX_FLOOR, pow2_scale, quant_e4m3_block};
use crate::cpu::quant_simd::{Grid, round_trip_blocks};

/// Values per activation scale block.
pub const ACT_BLOCK: usize = 128;

/// Where each value of a row sits in the decoded buffer, and the exact power-of-two prescale of values and scales.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layout {
    /// Elements per lane (even): element per_lane * l + q of a chunk is lane l of vector q; word halves: 2t high (a BF16 dot's first), 2t + 1 low.
    pub per_lane: usize,
    /// Every decoded value is multiplied by this power of two.
    pub value_factor: f32,
    /// Every block scale is multiplied by this power of two.
    pub scale_factor: f32,
}

impl Layout {
    /// Buffer index of element `i` of a row.
    pub fn position(&self, i: usize) -> usize {
        let chunk = 16 * self.per_lane;
        let j = i % chunk;
        let (l, q) = (j / self.per_lane, j % self.per_lane);
        i - j + q / 2 * 32 + 2 * l + 1 - q % 2
    }
}

/// Rows of `k` activations as FP8 codes decoded to bf16 (exact), zero-padded to whole blocks, one scale per block.
pub struct Fp8Rows {
    pub blocks: usize,
    /// Values per row: `blocks * 128`.
    pub stride: usize,
    pub values: Vec<u16>,
    pub scales: Vec<f32>,
}

impl Fp8Rows {
    /// Quantises every row of `x` (`k` values each) per 128 along K: codes e4m3(x / s), s a power of two; stores decoded codes and s, prescaled.
    pub fn quantise(x: &[f32], k: usize, layout: Layout) -> Fp8Rows {
        assert!(
            k > 0 && x.len().is_multiple_of(k),
            "activations are not whole rows of {k}"
        );
        let rows = x.len() / k;
        let blocks = k.div_ceil(ACT_BLOCK);
        let stride = blocks * ACT_BLOCK;
        let mut values = vec![0u16; rows * stride];
        let mut scales = vec![0f32; rows * blocks];
        let mut codes = [0u8; ACT_BLOCK];
        let m = layout.per_lane;
        let mut decoded = [0u16; ACT_BLOCK];
        let mut trip = [0f32; ACT_BLOCK];
        let simd = SimdPath::best();
        #[cfg(target_arch = "x86_64")]
        let net = matches!(simd, SimdPath::Avx512 | SimdPath::Avx512Bf16)
            .then(|| super::act_x86::Place::get(&layout))
            .flatten();
        for (r, row) in x.chunks_exact(k).enumerate() {
            let dst = &mut values[r * stride..][..stride];
            for (b, block) in row.chunks(ACT_BLOCK).enumerate() {
                #[cfg(target_arch = "x86_64")]
                if let Some(net) = net.filter(|_| block.len() == ACT_BLOCK)
                    && let Some(s) = net.block(block, layout.value_factor, &mut dst[b * ACT_BLOCK..][..ACT_BLOCK])
                {
                    scales[r * blocks + b] = s * layout.scale_factor;
                    continue;
                }
                decoded.fill(0);
                // Magnitudes order as their bits; a finite block's largest is below the infinity's.
                let top = block.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7FFF_FFFF));
                let s = if top < f32::INFINITY.to_bits() {
                    // The vector round trip gives e4m3(x / s) * s; dividing by the power of two s again is exact.
                    let s = pow2_scale(f32::from_bits(top), FP8_AMAX_FLOOR, e4m3::MAX);
                    let trip = &mut trip[..block.len()];
                    trip.copy_from_slice(block);
                    round_trip_blocks(trip, ACT_BLOCK, Grid::E4m3, simd);
                    let inv = 1.0 / s;
                    for (d, &y) in decoded.iter_mut().zip(trip.iter()) {
                        *d = ((y * inv * layout.value_factor).to_bits() >> 16) as u16;
                    }
                    s
                } else {
                    let s = quant_e4m3_block(block, &mut codes[..block.len()]);
                    for (d, &c) in decoded.iter_mut().zip(&codes[..block.len()]) {
                        // Exact: an e4m3 value times a power of two is a bf16.
                        *d = ((e4m3::TABLE[c as usize] * layout.value_factor).to_bits() >> 16) as u16;
                    }
                    s
                };
                scales[r * blocks + b] = s * layout.scale_factor;
                let out = &mut dst[b * ACT_BLOCK..][..ACT_BLOCK];
                match m {
                    4 => place::<4>(&decoded, out),
                    8 => place::<8>(&decoded, out),
                    _ => place_any(m, &decoded, out),
                }
            }
        }
        Fp8Rows {
            blocks,
            stride,
            values,
            scales,
        }
    }

    /// Stored values of row `r` (`stride` long, bf16 bits).
    pub fn row(&self, r: usize) -> &[u16] {
        &self.values[r * self.stride..(r + 1) * self.stride]
    }

    /// Block scales of row `r`.
    pub fn row_scales(&self, r: usize) -> &[f32] {
        &self.scales[r * self.blocks..(r + 1) * self.blocks]
    }
}

/// One block's decoded values into `Layout::position` order, for `M` values per lane.
#[inline(always)]
fn place<const M: usize>(decoded: &[u16; ACT_BLOCK], out: &mut [u16]) {
    for (src, out) in decoded.chunks_exact(16 * M).zip(out.chunks_exact_mut(16 * M)) {
        for l in 0..16 {
            for q in 0..M {
                // The even element of a pair in the word's high half.
                out[q / 2 * 32 + 2 * l + 1 - q % 2] = src[M * l + q];
            }
        }
    }
}

/// `place` for any even number of values per lane.
fn place_any(m: usize, decoded: &[u16; ACT_BLOCK], out: &mut [u16]) {
    for (src, out) in decoded.chunks(16 * m).zip(out.chunks_mut(16 * m)) {
        for (l, lane) in src.chunks(m).enumerate() {
            for (q, &v) in lane.iter().enumerate() {
                out[q / 2 * 32 + 2 * l + 1 - q % 2] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_a_permutation_of_each_chunk() {
        for per_lane in [4, 8] {
            let layout = Layout {
                per_lane,
                value_factor: 1.0,
                scale_factor: 1.0,
            };
            let mut seen = vec![false; 256];
            for i in 0..256 {
                let p = layout.position(i);
                assert_eq!(p / (16 * per_lane), i / (16 * per_lane));
                assert!(!seen[p]);
                seen[p] = true;
            }
        }
    }

    #[test]
    fn blocks_with_nan_take_the_scalar_encoder() {
        let mut x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.61).cos() * 5.0).collect();
        x[130] = f32::NAN;
        let layout = Layout {
            per_lane: 8,
            value_factor: 1.0,
            scale_factor: 1.0,
        };
        let rows = Fp8Rows::quantise(&x, 256, layout);
        let mut codes = [0u8; 128];
        for (b, block) in x.chunks(128).enumerate() {
            let s = quant_e4m3_block(block, &mut codes);
            assert_eq!(rows.scales[b].to_bits(), s.to_bits(), "block {b}");
            for (i, &c) in codes.iter().enumerate() {
                let got = rows.values[layout.position(128 * b + i)];
                assert_eq!(
                    got,
                    (e4m3::TABLE[c as usize].to_bits() >> 16) as u16,
                    "block {b} value {i}"
                );
            }
        }
    }

    #[test]
    fn stored_values_are_exact() {
        let x: Vec<f32> = (0..300).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let layout = Layout {
            per_lane: 4,
            value_factor: 2f32.powi(119),
            scale_factor: 2.0,
        };
        let rows = Fp8Rows::quantise(&x, 300, layout);
        let mut codes = [0u8; 128];
        for (b, block) in x.chunks(128).enumerate() {
            let s = quant_e4m3_block(block, &mut codes[..block.len()]);
            assert_eq!(rows.scales[b], 2.0 * s);
            for (i, &c) in codes[..block.len()].iter().enumerate() {
                let got = tensorfold_formats::bf16::bf16_to_f32(rows.values[layout.position(128 * b + i)]);
                assert_eq!(got, e4m3::decode(c) * 2f32.powi(119));
            }
        }
    }

    #[test]
    fn vector_blocks_store_the_scalar_encoders_codes() {
        let mut rng = crate::rng::Rng::new(31, 0);
        // Blocks of one magnitude (e4m3 subnormals at the small end), exact e4m3 midpoints, and zeros.
        let k = 128 * 24;
        let x: Vec<f32> = (0..k)
            .map(|i| {
                let mag = 2f32.powi((i / 128) as i32 * 3 - 30);
                match (i / 128) % 3 {
                    0 => mag * rng.normal() * if i % 7 == 0 { 1e-4 } else { 1.0 },
                    1 if i % 128 == 0 => 448.0 * mag,
                    1 => mag * (rng.below(2 * 448 * 1024) as f32 / 1024.0 - 448.0),
                    _ => 0.0,
                }
            })
            .collect();
        for per_lane in [4, 8] {
            let layout = Layout {
                per_lane,
                value_factor: 0.5,
                scale_factor: 4.0,
            };
            let rows = Fp8Rows::quantise(&x, k, layout);
            let mut codes = [0u8; 128];
            for (b, block) in x.chunks(128).enumerate() {
                let s = quant_e4m3_block(block, &mut codes);
                assert_eq!(rows.scales[b].to_bits(), (4.0 * s).to_bits(), "block {b}");
                for (i, &c) in codes.iter().enumerate() {
                    let want = ((e4m3::TABLE[c as usize] * 0.5).to_bits() >> 16) as u16;
                    assert_eq!(rows.values[layout.position(128 * b + i)], want, "block {b} value {i}");
                }
            }
        }
    }
}
