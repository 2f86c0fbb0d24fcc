//! Float64 pieces the GEMM references share (written from MODELS.md, not from the fast kernels), and case inputs.

use tensorfold_formats::{e4m3, e8m0};

use crate::contract::rng::Rng;

/// act_quant per block as MODELS.md states it: amax = max(|x|, 1e-4), s = 2^ceil(log2(amax / 448)), q = e4m3(clamp(x / s)); returns q * s.
pub fn act_quant_f64(x: &[f32], block: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for b in x.chunks(block) {
        let amax = b.iter().fold(1e-4f32 as f64, |m, &v| m.max((v as f64).abs()));
        let s = pow2(ceil_log2(amax / 448.0));
        out.extend(
            b.iter()
                .map(|&v| e4m3::decode(e4m3::encode((v as f64 / s).clamp(-448.0, 448.0) as f32)) as f64 * s),
        );
    }
    out
}

/// ceil(log2(v)) of a positive normal f64, exactly.
fn ceil_log2(v: f64) -> i32 {
    let bits = v.to_bits();
    ((bits >> 52) & 0x7FF) as i32 - 1023 + (bits & ((1 << 52) - 1) != 0) as i32
}

fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// `sum a[i] * b[i]` in f64.
pub fn dot_f64(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The e8m0 scale value of `code`.
pub fn e8m0_f64(code: u8) -> f64 {
    e8m0::decode(code) as f64
}

/// Activations as the model feeds them: roughly normal per row at a row scale from 2^-3 to 2^3, with rare outliers.
pub fn activations(rng: &mut Rng, rows: usize, k: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(rows * k);
    for _ in 0..rows {
        let scale = (2f64).powi(rng.below(7) as i32 - 3) as f32;
        for _ in 0..k {
            let outlier = if rng.below(512) == 0 { 16.0 } else { 1.0 };
            x.push(rng.normal() * scale * outlier);
        }
    }
    x
}

/// FP8 e4m3 weight codes: both signs, exponents across the range a 128x128 block quantisation leaves, a few subnormals and zeros; never NaN.
pub fn fp8_codes(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        for b in rng.next_u64().to_le_bytes() {
            let low = b & 0x7F;
            out.push(if low < 3 {
                b & 0x87
            } else {
                (b & 0x80) | (0x28 + low % 0x56)
            });
        }
    }
    out.truncate(len);
    out
}

/// e8m0 scale codes around 2^`center` (within ±3).
pub fn scale_codes(rng: &mut Rng, len: usize, center: i32) -> Vec<u8> {
    scale_codes_within(rng, len, center, 3)
}

/// e8m0 codes of random powers of two within `half` steps of 2^center.
pub fn scale_codes_within(rng: &mut Rng, len: usize, center: i32, half: u64) -> Vec<u8> {
    (0..len)
        .map(|_| e8m0::from_exponent(center + rng.below(2 * half + 1) as i32 - half as i32))
        .collect()
}
