//! A small counter-seeded generator whose output is the same on every platform and thread count (synth and contract inputs).

/// SplitMix64 stream; every value depends only on the seed and the draw index.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

/// Mixes `x` into a well-spread 64-bit value (SplitMix64's finaliser).
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A stable 64-bit hash of a string (FNV-1a then mixed).
pub fn hash_str(s: &str) -> u64 {
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    mix(h)
}

impl Rng {
    /// A stream keyed by `(seed, stream)`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng {
            state: mix(seed ^ mix(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// `len` bytes, the low byte of each draw.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Approximately standard normal: centred sum of four uniforms scaled to unit variance (no libm).
    pub fn normal(&mut self) -> f32 {
        let sum = self.uniform() + self.uniform() + self.uniform() + self.uniform();
        ((sum - 2.0) * 3f64.sqrt()) as f32
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::new(7, 1).next_u64(), Rng::new(7, 2).next_u64());
        assert_ne!(Rng::new(7, 1).next_u64(), Rng::new(8, 1).next_u64());
    }

    #[test]
    fn normal_has_unit_spread() {
        let mut rng = Rng::new(1, 2);
        let xs: Vec<f64> = (0..100_000).map(|_| rng.normal() as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
    }
}
