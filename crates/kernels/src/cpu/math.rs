//! Transcendentals from fixed FMA polynomials, so every platform and SIMD path gives the same bits (no libm).

pub(crate) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(crate) const LN2_HI: f32 = 0.693_145_75;
pub(crate) const LN2_LO: f32 = 1.428_606_8e-6;
/// Above this `exp` overflows to +inf; below `EXP_MIN` it underflows to 0.
pub(crate) const EXP_MAX: f32 = 88.72284;
pub(crate) const EXP_MIN: f32 = -103.97208;
/// `exp`'s Taylor coefficients for Horner's rule in `r`, highest degree first.
pub(crate) const EXP_POLY: [f32; 8] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// `2^n` for an integer `n` in [-252, 254], as an exact product of two normal powers when needed.
#[inline(always)]
fn pow2(n: i32) -> (f32, f32) {
    let a = n.clamp(-126, 127);
    let b = n - a;
    (
        f32::from_bits(((a + 127) as u32) << 23),
        f32::from_bits(((b + 127).clamp(1, 254) as u32) << 23),
    )
}

/// `e^x` within about 2 ulp; overflow gives +inf, underflow 0, NaN stays NaN.
#[inline]
pub fn exp(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > EXP_MAX {
        return f32::INFINITY;
    }
    if x < EXP_MIN {
        return 0.0;
    }
    let n = (x * LOG2E).round_ties_even();
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let mut p = EXP_POLY[0];
    for &c in &EXP_POLY[1..] {
        p = p.mul_add(r, c);
    }
    let (a, b) = pow2(n as i32);
    if b == 1.0 { p * a } else { p * a * b }
}

/// Natural log within about 2 ulp for positive finite inputs; 0 gives -inf, negatives NaN.
#[inline]
pub fn ln(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 {
        return f32::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    let (x, bias) = if x < f32::MIN_POSITIVE {
        (x * 8_388_608.0, 23)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let mut e = ((bits >> 23) & 0xFF) as i32 - 127 - bias;
    let mut m = f32::from_bits((bits & 0x007F_FFFF) | 0x3F80_0000);
    if m > std::f32::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p = 2.0 / 9.0f32;
    p = p.mul_add(z, 2.0 / 7.0);
    p = p.mul_add(z, 2.0 / 5.0);
    p = p.mul_add(z, 2.0 / 3.0);
    p = p.mul_add(z, 2.0);
    let ln_m = s * p;
    let ef = e as f32;
    ef.mul_add(LN2_HI, ef.mul_add(LN2_LO, ln_m))
}

/// `1 / (1 + e^-x)`.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `x * sigmoid(x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `ln(1 + y)`, accurate for small `y` (the `u = 1 + y` correction trick).
#[inline]
pub fn ln_1p(y: f32) -> f32 {
    let u = 1.0 + y;
    if u == 1.0 { y } else { ln(u) * (y / (u - 1.0)) }
}

/// `ln(1 + e^x)`, computed as `max(x, 0) + ln_1p(e^-|x|)`.
#[inline]
pub fn softplus(x: f32) -> f32 {
    x.max(0.0) + ln_1p(exp(-x.abs()))
}

/// `ln 2` in two parts: `n * LN2_HI_F64` is exact for |n| < 2^20.
const LN2_HI_F64: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO_F64: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// Adding and subtracting `1.5 * 2^52` rounds an f64 below 2^51 in magnitude to the nearest integer, ties to even.
const ROUND_F64: f64 = 6_755_399_441_055_744.0;
/// `pi / 2` in three parts of at most 32 significant bits, so `n * PIO2_k` is exact for |n| < 2^21.
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000);
const PIO2_2: f64 = f64::from_bits(0x3DD0_B461_1A60_0000);
const PIO2_3: f64 = f64::from_bits(0x3BA3_198A_2E00_0000);
/// Taylor coefficients of `(sin r - r) / r^3`: (-1)^(k+1) / (2k+3)!.
const SIN_TAYLOR: [f64; 9] = [
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5040.0,
    1.0 / 362880.0,
    -1.0 / 39916800.0,
    1.0 / 6227020800.0,
    -1.0 / 1307674368000.0,
    1.0 / 355687428096000.0,
    -1.0 / 121645100408832000.0,
];
/// Taylor coefficients of `(cos r - 1) / r^2`: (-1)^(k+1) / (2k+2)!.
const COS_TAYLOR: [f64; 9] = [
    -1.0 / 2.0,
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40320.0,
    -1.0 / 3628800.0,
    1.0 / 479001600.0,
    -1.0 / 87178291200.0,
    1.0 / 20922789888000.0,
    -1.0 / 6402373705728000.0,
];
/// Largest `|x|` `sin_cos_f64` reduces exactly: `2^20 * pi / 2`.
pub const SIN_COS_F64_MAX: f64 = 1_647_099.0;

/// `2^n` for `n` in [-1022, 1023].
#[inline(always)]
fn pow2_f64(n: i64) -> f64 {
    f64::from_bits(((n + 1023) as u64) << 52)
}

/// `e^x` in f64 within about 1 ulp for |x| <= 700 (Taylor polynomial of degree 16 after `x = n ln2 + r`).
pub fn exp_f64(x: f64) -> f64 {
    assert!(x.abs() <= 700.0, "exp_f64({x}) outside [-700, 700]");
    let n = (x * std::f64::consts::LOG2_E + ROUND_F64) - ROUND_F64;
    let r = (x - n * LN2_HI_F64) - n * LN2_LO_F64;
    let mut p = 1.0;
    for k in (1..=16).rev() {
        p = 1.0 + p * r / k as f64;
    }
    p * pow2_f64(n as i64)
}

/// Natural log in f64 within about 1 ulp for positive normal `x` (atanh series in `s = (m-1)/(m+1)`).
pub fn ln_f64(x: f64) -> f64 {
    assert!(x.is_normal() && x > 0.0, "ln_f64({x}) needs a positive normal input");
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let mut p = 2.0 / 25.0;
    for k in (0..12).rev() {
        p = 2.0 / (2 * k + 1) as f64 + p * z;
    }
    let ef = e as f64;
    ef * LN2_HI_F64 + (ef * LN2_LO_F64 + s * p)
}

/// `(sin x, cos x)` in f64 within a few ulp of 1 for |x| <= `SIN_COS_F64_MAX` (Cody-Waite reduction, Taylor to degree 19).
pub fn sin_cos_f64(x: f64) -> (f64, f64) {
    assert!(
        x.abs() <= SIN_COS_F64_MAX,
        "sin_cos_f64({x}) outside the exact reduction range"
    );
    let n = (x * std::f64::consts::FRAC_2_PI + ROUND_F64) - ROUND_F64;
    let r = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3;
    let z = r * r;
    let (mut s, mut c) = (0.0, 0.0);
    for k in (0..9).rev() {
        s = SIN_TAYLOR[k] + s * z;
        c = COS_TAYLOR[k] + c * z;
    }
    let sin_r = r + r * z * s;
    let cos_r = 1.0 + z * c;
    match (n as i64) & 3 {
        0 => (sin_r, cos_r),
        1 => (cos_r, -sin_r),
        2 => (-sin_r, -cos_r),
        _ => (-cos_r, sin_r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f64) -> f64 {
        let b32 = b as f32;
        let ulp = (f32::from_bits(b32.abs().to_bits() + 1) - b32.abs()) as f64;
        (a as f64 - b).abs() / ulp
    }

    #[test]
    fn exp_and_ln_within_a_few_ulp() {
        let mut worst = (0f64, 0f64);
        for i in 0..200_000 {
            let x = -100.0 + 188.0 * i as f32 / 200_000.0;
            let want = (x as f64).exp();
            if want > 1e-37 && want < 3e38 {
                worst.0 = worst.0.max(ulps(exp(x), want));
            }
            let y = (i as f32 + 0.5) * 1e-3 * if i % 2 == 0 { 1.0 } else { 1e-20 };
            worst.1 = worst.1.max(ulps(ln(y), (y as f64).ln()));
        }
        assert!(
            worst.0 <= 3.0 && worst.1 <= 3.0,
            "exp {} ulp, ln {} ulp",
            worst.0,
            worst.1
        );
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(exp(-200.0), 0.0);
        assert!(exp(100.0).is_infinite() && ln(-1.0).is_nan() && ln(0.0) == f32::NEG_INFINITY);
        assert!(exp(-90.0) > 0.0 && exp(-90.0).is_subnormal());
    }

    #[test]
    fn activations_match_f64() {
        for i in -400..400 {
            let x = i as f32 * 0.05;
            let xd = x as f64;
            let sp = (1.0 + xd.exp()).ln();
            assert!((softplus(x) as f64 - sp).abs() <= 4e-7 * sp.max(1e-3), "softplus {x}");
            let sg = 1.0 / (1.0 + (-xd).exp());
            assert!((sigmoid(x) as f64 - sg).abs() <= 3e-7 * sg, "sigmoid {x}");
            assert!(
                (silu(x) as f64 - xd * sg).abs() <= 4e-7 * (xd * sg).abs().max(1e-6),
                "silu {x}"
            );
        }
    }
    #[test]
    fn f64_exp_ln_sin_cos_match_std() {
        let mut rng = crate::rng::Rng::new(3, 4);
        for _ in 0..100_000 {
            let x = (rng.uniform() - 0.5) * 1400.0;
            let (e, want) = (exp_f64(x), x.exp());
            assert!((e - want).abs() <= 4e-16 * want, "exp {x}");
            let y = exp_f64((rng.uniform() - 0.5) * 1400.0);
            assert!((ln_f64(y) - y.ln()).abs() <= 4e-16 * y.ln().abs().max(1e-300), "ln {y}");
            let a = (rng.uniform() - 0.5) * 2.0 * SIN_COS_F64_MAX;
            let (s, c) = sin_cos_f64(a);
            assert!(
                (s - a.sin()).abs() <= 4.5e-16 && (c - a.cos()).abs() <= 4.5e-16,
                "sin/cos {a}"
            );
        }
        assert_eq!((exp_f64(0.0), ln_f64(1.0)), (1.0, 0.0));
        assert_eq!(sin_cos_f64(0.0), (0.0, 1.0));
        for x in [1e-300, 1.0 - 1e-16, 1.0 + 2e-16, 0.5, 2.0, 1e300] {
            assert!((ln_f64(x) - x.ln()).abs() <= 3e-16 * x.ln().abs().max(1e-16), "ln {x}");
        }
    }
}
