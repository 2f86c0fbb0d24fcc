//! MXFP4: e2m1 codes two per byte (element 2k in the low nibble), one e8m0 scale per 32 along K.

use crate::error::{check_len, check_multiple};
use crate::{FormatError, e2m1, e8m0};

/// Values per scale.
pub const BLOCK: usize = 32;

/// Smallest block amax: keeps amax / 6 a normal f32 so the scale exponent stays within e8m0.
const AMAX_FLOOR: f32 = e2m1::MAX * f32::MIN_POSITIVE;

/// Packs nibble codes two per byte; `codes.len()` must be even and every code below 16.
pub fn pack(codes: &[u8]) -> Result<Vec<u8>, FormatError> {
    check_multiple("mxfp4 codes", codes.len(), 2)?;
    if let Some(idx) = codes.iter().position(|&c| c > 0xF) {
        return Err(FormatError::InvalidCode {
            what: "mxfp4 codes",
            idx,
            code: codes[idx] as u32,
        });
    }
    Ok(codes.chunks_exact(2).map(|p| p[0] | (p[1] << 4)).collect())
}

/// Unpacks bytes into nibble codes; `out.len() == 2 * bytes.len()`.
pub fn unpack(bytes: &[u8], out: &mut [u8]) -> Result<(), FormatError> {
    check_len("mxfp4 unpacked codes", 2 * bytes.len(), out.len())?;
    for (&b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = b & 0xF;
        pair[1] = b >> 4;
    }
    Ok(())
}

/// Checks a row of `n` values against its packed bytes and scales.
fn check_row(n: usize, packed: usize, scales: usize) -> Result<(), FormatError> {
    check_multiple("mxfp4 row", n, BLOCK)?;
    check_len("mxfp4 packed bytes", n / 2, packed)?;
    check_len("mxfp4 scales", n / BLOCK, scales)
}

/// Decodes one row of `out.len()` values: code * 2^(scale-127), exact.
pub fn dequantize_row(packed: &[u8], scales: &[u8], out: &mut [f32]) -> Result<(), FormatError> {
    check_row(out.len(), packed.len(), scales.len())?;
    let blocks = packed.chunks_exact(BLOCK / 2).zip(out.chunks_exact_mut(BLOCK));
    for ((bytes, block), &scale) in blocks.zip(scales) {
        let s = e8m0::TABLE[scale as usize];
        for (&b, pair) in bytes.iter().zip(block.chunks_exact_mut(2)) {
            pair[0] = e2m1::TABLE[(b & 0xF) as usize] * s;
            pair[1] = e2m1::TABLE[(b >> 4) as usize] * s;
        }
    }
    Ok(())
}

/// The official FP4 round trip is `dequantize_row` of this (DeepSeek's rule): per block s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), codes = e2m1::encode(x / s).
pub fn quantize_row(x: &[f32], packed: &mut [u8], scales: &mut [u8]) -> Result<(), FormatError> {
    check_row(x.len(), packed.len(), scales.len())?;
    if let Some(idx) = x.iter().position(|v| !v.is_finite()) {
        return Err(FormatError::NonFinite {
            what: "mxfp4 input",
            idx,
        });
    }
    let blocks = x.chunks_exact(BLOCK).zip(packed.chunks_exact_mut(BLOCK / 2));
    for ((block, bytes), scale) in blocks.zip(scales.iter_mut()) {
        let amax = block.iter().fold(AMAX_FLOOR, |m, v| m.max(v.abs()));
        let e = e8m0::ceil_log2(amax / e2m1::MAX);
        *scale = e8m0::from_exponent(e);
        let s = e8m0::decode(*scale);
        for (pair, b) in block.chunks_exact(2).zip(bytes.iter_mut()) {
            *b = e2m1::encode(pair[0] / s) | (e2m1::encode(pair[1] / s) << 4);
        }
    }
    Ok(())
}
