//! CPU `nvfp4_round_trip`: rows split over threads; per 16 values an e4m3 scale and e2m1 values, rounding decided in f64 (exact).

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// Values per NVFP4 scale block.
pub const NVFP4_BLOCK: usize = 16;
/// Largest e2m1 magnitude.
const QMAX: f64 = 6.0;

/// Round to nearest even on a float grid (`mant_bits` bits, subnormals below 2^min_exp), saturating at `max`.
fn round_grid(v: f64, mant_bits: i32, min_exp: i32, max: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let exp = (((v.abs().to_bits() >> 52) & 0x7FF) as i32 - 1023).max(min_exp);
    let step = 2f64.powi(exp - mant_bits);
    ((v / step).round_ties_even() * step).clamp(-max, max)
}

/// The block's e4m3 scale `e4m3(amax / 6)`; f64 division leaves every midpoint decision exact for f32 inputs.
fn block_scale(block: &[f32], pow2_only: bool) -> f64 {
    let amax = block.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
    let s = round_grid(amax / QMAX, 3, -6, 448.0);
    if pow2_only && s > 0.0 {
        2f64.powi(s.log2().ceil() as i32)
    } else {
        s
    }
}

/// NVFP4-style round trip in place of every `row_len` row, per 16 values (the last block may be short); a zero scale gives zeros.
pub fn nvfp4_round_trip(x: &mut [f32], row_len: usize, launch: &CpuLaunch, faults: Faults) {
    assert!(row_len > 0, "nvfp4_round_trip: row_len is 0");
    assert_eq!(
        x.len() % row_len,
        0,
        "nvfp4_round_trip: {} values are not whole rows of {row_len}",
        x.len()
    );
    let used = if faults.on("drop_last_element") {
        row_len - 1
    } else {
        row_len
    };
    let block = if faults.on("block_32") {
        2 * NVFP4_BLOCK
    } else {
        NVFP4_BLOCK
    };
    let pow2_only = faults.on("pow2_scale");
    par_chunks_mut(x, row_len, launch.split_threads(x.len()), |_, chunk| {
        for row in chunk.chunks_mut(row_len) {
            for b in row[..used].chunks_mut(block) {
                let s = block_scale(b, pow2_only);
                for v in b.iter_mut() {
                    // q * s is exact in f32: at most 2 significant bits times at most 4.
                    *v = if s == 0.0 {
                        0.0
                    } else {
                        (round_grid(*v as f64 / s, 1, 0, QMAX) * s) as f32
                    };
                }
            }
        }
    });
}
