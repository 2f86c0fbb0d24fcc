//! Inputs the exact-lane tests of `exact.rs` and `exact2.rs` share.

use super::cpu::LAYOUT;
use crate::gemm::PAIRS;
use tensorfold_formats::{e2m1, e4m3};

/// Deterministic bytes.
pub(super) fn bytes(seed: u64, len: usize) -> Vec<u8> {
    crate::rng::Rng::new(seed, 0).bytes(len)
}

/// Element values as the decoded bf16 row in `LAYOUT` order.
pub(super) fn layout(values: &[f32]) -> Vec<u16> {
    let mut a = vec![0u16; values.len()];
    for (i, v) in values.iter().enumerate() {
        a[LAYOUT.position(i)] = (v.to_bits() >> 16) as u16;
    }
    a
}

/// Activations and 16 weight rows of `k` whose lanes round at their last step: seven activations of 384-448 and one subnormal per lane, against 6 and (for the subnormal) 0.5; asserts that some lane's exact sum is not an f32.
pub(super) fn rounding_lanes(k: usize) -> (Vec<f32>, Vec<u8>) {
    let values: Vec<f32> = bytes(5, k)
        .iter()
        .enumerate()
        .map(|(i, &b)| e4m3::TABLE[if i % 8 == 7 { 1 + (b & 0x6) } else { 0x7C + b % 3 } as usize])
        .collect();
    let w: Vec<u8> = bytes(6, PAIRS * k / 2)
        .iter()
        .enumerate()
        .map(|(i, &b)| match (b % 7, i % 4) {
            (0, _) => b,
            (_, 3) => 0x17,
            _ => 0x77,
        })
        .collect();
    let rounds = (0..PAIRS * k / 8).any(|lane| {
        let (row, l) = (lane / (k / 8), lane % (k / 8));
        let p: i64 = (0..8)
            .map(|q| {
                let e = 8 * l + q;
                let nib = (w[row * k / 2 + e / 2] >> (4 * (e % 2))) & 0xF;
                (values[e] * 512.0) as i64 * (2.0 * e2m1::TABLE[nib as usize]) as i64
            })
            .sum();
        p as f32 as i64 != p
    });
    assert!(rounds, "no lane rounds: the test shows nothing");
    (values, w)
}
