//! FP4 e2m1 nibble codes: bit 3 sign, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no infinities or NaN.

/// Largest finite magnitude.
pub const MAX: f32 = 6.0;

/// Magnitudes of codes 0..8; codes 8..16 are their negatives.
const MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// All 16 codes decoded, for table lookups in hot loops.
pub const TABLE: [f32; 16] = {
    let mut table = [0.0; 16];
    let mut code = 0;
    while code < 16 {
        table[code] = decode(code as u8);
        code += 1;
    }
    table
};

/// Exact; only the low nibble is read.
pub const fn decode(nibble: u8) -> f32 {
    let m = MAGNITUDES[(nibble & 0x7) as usize];
    if nibble & 0x8 != 0 { -m } else { m }
}

/// Rounds to nearest, ties to even code; saturates to ±6 (±inf included); NaN gives +0 since the format has no NaN.
pub fn encode(x: f32) -> u8 {
    if x.is_nan() {
        return 0;
    }
    let sign = if x.is_sign_negative() { 0x8 } else { 0 };
    let a = x.abs();
    // Each bound is the midpoint between two codes; a tie goes to the even code.
    let code = if a <= 0.25 {
        0
    } else if a < 0.75 {
        1
    } else if a <= 1.25 {
        2
    } else if a < 1.75 {
        3
    } else if a <= 2.5 {
        4
    } else if a < 3.5 {
        5
    } else if a <= 5.0 {
        6
    } else {
        7
    };
    sign | code
}
