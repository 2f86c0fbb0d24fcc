//! bfloat16: the top 16 bits of an f32.

/// Rounds to nearest, ties to even; overflow gives ±inf; NaN gives a quiet NaN with its sign and top payload bits.
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let lsb = (bits >> 16) & 1;
    ((bits + 0x7FFF + lsb) >> 16) as u16
}

/// Exact: every bf16 is an f32.
pub const fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}
