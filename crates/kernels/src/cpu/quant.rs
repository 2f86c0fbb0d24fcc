//! Per-block activation quantisation as DeepSeek's official code runs it: power-of-two scales, FP8 e4m3 and FP4 e2m1.

use tensorfold_formats::{e2m1, e4m3, e8m0};

/// Smallest FP8 block amax (DeepSeek's act_quant floor).
pub const FP8_AMAX_FLOOR: f32 = 1e-4;
/// Smallest FP4 block amax: keeps amax / 6 a normal f32.
pub const FP4_AMAX_FLOOR: f32 = e2m1::MAX * f32::MIN_POSITIVE;

/// `2^ceil(log2(max(amax, floor) / qmax))`, exactly.
#[inline]
pub fn pow2_scale(amax: f32, floor: f32, qmax: f32) -> f32 {
    let e = e8m0::ceil_log2(amax.max(floor) / qmax);
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Largest magnitude in `x` (NaN-free inputs).
#[inline]
pub fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// FP8 e4m3 codes of `clamp(x / s, ±448)` into `codes`; returns the block scale `s`.
pub fn quant_e4m3_block(x: &[f32], codes: &mut [u8]) -> f32 {
    let s = pow2_scale(amax(x), FP8_AMAX_FLOOR, e4m3::MAX);
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = e4m3::encode((v / s).clamp(-e4m3::MAX, e4m3::MAX));
    }
    s
}

/// The FP8 round trip of one block in place: `x = e4m3(x / s) * s`.
pub fn round_trip_e4m3_block(x: &mut [f32]) {
    let s = pow2_scale(amax(x), FP8_AMAX_FLOOR, e4m3::MAX);
    for v in x.iter_mut() {
        *v = e4m3::decode(e4m3::encode((*v / s).clamp(-e4m3::MAX, e4m3::MAX))) * s;
    }
}

/// The FP4 round trip of one block in place: `x = e2m1(x / s) * s`.
pub fn round_trip_e2m1_block(x: &mut [f32]) {
    let s = pow2_scale(amax(x), FP4_AMAX_FLOOR, e2m1::MAX);
    for v in x.iter_mut() {
        *v = e2m1::decode(e2m1::encode((*v / s).clamp(-e2m1::MAX, e2m1::MAX))) * s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_the_official_powers_of_two() {
        assert_eq!(pow2_scale(448.0, FP8_AMAX_FLOOR, 448.0), 1.0);
        assert_eq!(pow2_scale(449.0, FP8_AMAX_FLOOR, 448.0), 2.0);
        assert_eq!(pow2_scale(0.0, FP8_AMAX_FLOOR, 448.0), 2f32.powi(-22));
        assert_eq!(pow2_scale(6.0, FP4_AMAX_FLOOR, 6.0), 1.0);
        let mut x = [0.1f32, -3.0, 7.0, 0.0];
        round_trip_e2m1_block(&mut x);
        assert_eq!(x, [0.0, -3.0, 8.0, 0.0]);
        let mut codes = [0u8; 2];
        let s = quant_e4m3_block(&[1.0, -896.0], &mut codes);
        assert_eq!((s, e4m3::decode(codes[0]), e4m3::decode(codes[1])), (2.0, 0.5, -448.0));
    }
}
