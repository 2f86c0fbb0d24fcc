//! FP8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7F and 0xFF are NaN.

/// Largest finite magnitude.
pub const MAX: f32 = 448.0;

/// All 256 codes decoded, for table lookups in hot loops.
pub const TABLE: [f32; 256] = {
    let mut table = [0.0; 256];
    let mut code = 0;
    while code < 256 {
        table[code] = decode(code as u8);
        code += 1;
    }
    table
};

/// Exact; the NaN codes decode to a quiet NaN carrying the code's sign.
pub const fn decode(b: u8) -> f32 {
    let sign = ((b & 0x80) as u32) << 24;
    let exp = ((b >> 3) & 0xF) as u32;
    let man = (b & 0x7) as u32;
    if exp == 0xF && man == 0x7 {
        return f32::from_bits(sign | 0x7FC0_0000);
    }
    if exp == 0 {
        // Subnormal: man * 2^-9, exact in f32.
        return f32::from_bits(sign | (man as f32 / 512.0).to_bits());
    }
    f32::from_bits(sign | ((exp + 120) << 23) | (man << 20))
}

/// Rounds to nearest, ties to even (subnormals included); saturates to ±448 beyond range and for ±inf; NaN gives 0x7F or 0xFF by sign.
pub fn encode(x: f32) -> u8 {
    let sign = ((x.to_bits() >> 24) & 0x80) as u8;
    if x.is_nan() {
        return sign | 0x7F;
    }
    let a = x.abs();
    if a >= MAX {
        return sign | 0x7E;
    }
    if a < 1.0 / 64.0 {
        // Below the smallest normal the grid is uniform in steps of 2^-9; code 8 is the smallest normal.
        return sign | (a * 512.0).round_ties_even() as u8;
    }
    let bits = a.to_bits();
    let odd = (bits >> 20) & 1;
    sign | ((bits - (120 << 23) + 0x7FFFF + odd) >> 20) as u8
}
