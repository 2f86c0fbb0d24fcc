//! RoPE inverse-frequency tables as DeepSeek's `precompute_freqs_cis` builds them, in libm-free f64 then rounded to f32.

use crate::cpu::math::{exp_f64, ln_f64};

/// YaRN's frequency ramp (DeepSeek V4's compressed layers: factor 16, original 65536, beta 32 / 1, no mscale).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    pub factor: f64,
    pub original_max_position_embeddings: f64,
    pub beta_fast: f64,
    pub beta_slow: f64,
}

impl Yarn {
    /// DeepSeek V4's `rope_scaling`.
    pub const DSV4: Yarn = Yarn {
        factor: 16.0,
        original_max_position_embeddings: 65536.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
    };
}

/// `inv_freq[i]` for the `rope_dim / 2` interleaved pairs: `theta^(-2i/rope_dim)`, YaRN-ramped when `yarn` is given.
pub fn inv_freqs(rope_dim: usize, theta: f64, yarn: Option<Yarn>) -> Vec<f32> {
    assert!(
        rope_dim >= 2 && rope_dim.is_multiple_of(2),
        "rope_dim {rope_dim} must be even and positive"
    );
    let ln_theta = ln_f64(theta);
    let dim = rope_dim as f64;
    let base: Vec<f64> = (0..rope_dim / 2)
        .map(|i| exp_f64(-((2 * i) as f64) / dim * ln_theta))
        .collect();
    let Some(y) = yarn else {
        return base.iter().map(|&f| f as f32).collect();
    };
    // The dimension whose wavelength fits `rotations` times into the original context.
    let correction_dim = |rotations: f64| {
        dim * ln_f64(y.original_max_position_embeddings / (rotations * 2.0 * std::f64::consts::PI)) / (2.0 * ln_theta)
    };
    let low = correction_dim(y.beta_fast).floor().max(0.0);
    let mut high = correction_dim(y.beta_slow).ceil().min(dim - 1.0);
    if low == high {
        high += 0.001;
    }
    base.iter()
        .enumerate()
        .map(|(i, &f)| {
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let smooth = 1.0 - ramp;
            (f / y.factor * (1.0 - smooth) + f * smooth) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same table from std's libm, written independently.
    fn with_std(rope_dim: usize, theta: f64, yarn: Option<Yarn>) -> Vec<f32> {
        let d = rope_dim as f64;
        let corr = |y: &Yarn, rot: f64| {
            d * (y.original_max_position_embeddings / (rot * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln())
        };
        (0..rope_dim / 2)
            .map(|i| {
                let f = theta.powf(-(2.0 * i as f64) / d);
                match &yarn {
                    None => f as f32,
                    Some(y) => {
                        let (lo, hi) = (
                            corr(y, y.beta_fast).floor().max(0.0),
                            corr(y, y.beta_slow).ceil().min(d - 1.0),
                        );
                        let hi = if lo == hi { hi + 0.001 } else { hi };
                        let ramp = ((i as f64 - lo) / (hi - lo)).clamp(0.0, 1.0);
                        (f / y.factor * ramp + f * (1.0 - ramp)) as f32
                    }
                }
            })
            .collect()
    }

    #[test]
    fn tables_match_libm_and_deepseek_v4_ramp() {
        for rope_dim in [2, 6, 18, 64, 128] {
            for (theta, yarn) in [
                (10000.0, None),
                (160000.0, Some(Yarn::DSV4)),
                (10000.0, Some(Yarn::DSV4)),
            ] {
                assert_eq!(
                    inv_freqs(rope_dim, theta, yarn),
                    with_std(rope_dim, theta, yarn),
                    "{rope_dim} {theta}"
                );
            }
        }
        // V4 compressed layers: pairs 0..=15 keep theta's frequency, pairs 25.. are divided by 16.
        let plain = inv_freqs(64, 160000.0, None);
        let yarn = inv_freqs(64, 160000.0, Some(Yarn::DSV4));
        assert_eq!(yarn[..16], plain[..16]);
        assert!(
            yarn[25..]
                .iter()
                .zip(&plain[25..])
                .all(|(y, p)| (y * 16.0 / p - 1.0).abs() < 1e-6)
        );
        assert!(
            yarn[16..25]
                .iter()
                .zip(&plain[16..25])
                .all(|(y, p)| y < p && y * 16.0 > *p)
        );
        assert_eq!(plain[0], 1.0);
    }
}
