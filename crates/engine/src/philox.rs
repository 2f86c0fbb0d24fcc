//! Philox4x32-10, the counter-based generator keyed sampling draws from: output depends only on (key, counter).

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

#[inline]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// Four 32-bit outputs for `counter` under `key` (10 rounds).
pub fn philox4x32(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// A uniform draw in [0, 1) with 53 random bits for `(key, position, stream)`.
pub fn uniform(key: u64, position: u64, stream: u32) -> f64 {
    let out = philox4x32(
        [position as u32, (position >> 32) as u32, stream, 0],
        [key as u32, (key >> 32) as u32],
    );
    let bits = ((out[0] as u64) << 21) ^ (out[1] as u64 >> 11);
    (bits & ((1 << 53) - 1)) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_vectors() {
        // Random123's published Philox4x32-10 test vectors.
        assert_eq!(
            philox4x32([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_is_in_range_and_keyed() {
        let a = uniform(7, 100, 0);
        assert!((0.0..1.0).contains(&a));
        assert_eq!(a, uniform(7, 100, 0));
        assert_ne!(a, uniform(8, 100, 0));
        assert_ne!(a, uniform(7, 101, 0));
        let mean = (0..10_000).map(|p| uniform(1, p, 0)).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }
}
