//! Kimi K2 "pack-quantized" INT4: value i of an i32 in bits 4i+3..4i as value + 8, one scale per 32 along K.

use crate::FormatError;
use crate::error::{check_len, check_multiple};

/// Values per scale.
pub const GROUP: usize = 32;

/// Values per packed word.
pub const PER_WORD: usize = 8;

/// Splits a word into its 8 signed values, v0 from the lowest nibble.
pub fn unpack_word(w: i32) -> [i8; 8] {
    let bits = w as u32;
    std::array::from_fn(|i| ((bits >> (4 * i)) & 0xF) as i8 - 8)
}

/// Packs 8 values in -8..=7, v0 into the lowest nibble.
pub fn pack_word(v: [i8; 8]) -> i32 {
    v.iter().enumerate().fold(0u32, |w, (i, &x)| {
        assert!((-8..=7).contains(&x), "int4 value {x} outside -8..=7");
        w | (((x + 8) as u32) << (4 * i))
    }) as i32
}

/// Dequantizes one row of `out.len()` values: value * scale of its group of 32.
pub fn dequantize_row(packed: &[i32], scales: &[f32], out: &mut [f32]) -> Result<(), FormatError> {
    check_multiple("int4 row", out.len(), GROUP)?;
    check_len("int4 packed words", out.len() / PER_WORD, packed.len())?;
    check_len("int4 scales", out.len() / GROUP, scales.len())?;
    let groups = packed.chunks_exact(GROUP / PER_WORD).zip(out.chunks_exact_mut(GROUP));
    for ((words, group), &s) in groups.zip(scales) {
        for (&w, vals) in words.iter().zip(group.chunks_exact_mut(PER_WORD)) {
            for (o, v) in vals.iter_mut().zip(unpack_word(w)) {
                *o = v as f32 * s;
            }
        }
    }
    Ok(())
}
