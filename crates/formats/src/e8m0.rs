//! e8m0 (float8_e8m0fnu): an unsigned power of two 2^(b-127); 255 is NaN; no zero.

/// Code of 2^0.
pub const BIAS: i32 = 127;

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

/// Exact: code 0 is 2^-127, an f32 subnormal; 255 is a quiet NaN.
pub const fn decode(b: u8) -> f32 {
    match b {
        0 => f32::from_bits(0x0040_0000),
        255 => f32::NAN,
        _ => f32::from_bits((b as u32) << 23),
    }
}

/// PyTorch's cast: sign ignored, round to nearest (a normal rounds up from mantissa 0.5), NaN/±inf/overflow to 255, ±0 to 0.
pub fn encode(x: f32) -> u8 {
    let bits = x.to_bits();
    let exp = (bits >> 23) & 0xFF;
    if exp == 0xFF {
        return 0xFF;
    }
    let guard = bits & 0x40_0000 != 0;
    let rest = bits & 0x3F_FFFF != 0;
    // The implicit leading bit plays the LSB: 1 for normals, 0 for subnormals.
    let lsb = exp > 0;
    let round_up = guard && (rest || lsb);
    (exp + round_up as u32) as u8
}

/// Code of 2^e.
pub fn from_exponent(e: i32) -> u8 {
    assert!((-BIAS..=BIAS).contains(&e), "e8m0 exponent {e} outside -127..=127");
    (e + BIAS) as u8
}

/// ceil(log2(x)) for a positive normal finite f32, exactly, from its bits.
pub fn ceil_log2(x: f32) -> i32 {
    debug_assert!(x.is_normal() && x > 0.0, "ceil_log2 of {x}");
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32 - BIAS;
    exp + (bits & 0x7F_FFFF != 0) as i32
}
