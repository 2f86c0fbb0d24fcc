//! Transcendentals from fixed FMA polynomials, so every platform and SIMD path gives the same bits (no libm).

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;

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
    if x > 88.72284 {
        return f32::INFINITY;
    }
    if x < -103.97208 {
        return 0.0;
    }
    let n = (x * LOG2E).round_ties_even();
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let mut p = 1.0 / 5040.0f32;
    p = p.mul_add(r, 1.0 / 720.0);
    p = p.mul_add(r, 1.0 / 120.0);
    p = p.mul_add(r, 1.0 / 24.0);
    p = p.mul_add(r, 1.0 / 6.0);
    p = p.mul_add(r, 0.5);
    p = p.mul_add(r, 1.0);
    p = p.mul_add(r, 1.0);
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
}
