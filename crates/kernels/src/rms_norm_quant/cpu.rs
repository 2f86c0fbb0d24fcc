//! CPU `rms_norm_quant`: `rms_norm`, then each row's 128-blocks FP8 round-tripped as DeepSeek's act_quant does.

use tensorfold_formats::e4m3;

use crate::cpu::quant::{FP8_AMAX_FLOOR, amax, pow2_scale};
use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;
use crate::rms_norm::rms_norm;

/// Values a quantisation scale covers.
pub const BLOCK: usize = 128;

/// `y = rms_norm(x) * weight` and `yq` its act_quant round trip, `e4m3(y / s) * s` per 128 values of a row.
pub fn rms_norm_quant(
    x: &[f32],
    weight: &[f32],
    eps: f32,
    y: &mut [f32],
    yq: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let dim = weight.len();
    assert_eq!(y.len(), yq.len(), "rms_norm_quant: outputs differ in length");
    rms_norm(x, weight, eps, y, launch, faults);
    round_trip_rows(y, dim, yq, launch, faults);
}

/// `yq` the act_quant round trip of rows `y` of `dim`, `e4m3(y / s) * s` per 128 values (faults: `skip_last_row`, `lost_act_scale`).
pub(crate) fn round_trip_rows(y: &[f32], dim: usize, yq: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    let rows = y.len() / dim;
    par_chunks_mut(yq, dim, launch.split_threads(yq.len()), |first_row, chunk| {
        for (i, out) in chunk.chunks_mut(dim).enumerate() {
            let r = first_row + i;
            if faults.on("skip_last_row") && r + 1 == rows {
                continue;
            }
            let row = &y[r * dim..(r + 1) * dim];
            for (o, b) in out.chunks_mut(BLOCK).zip(row.chunks(BLOCK)) {
                let s = pow2_scale(amax(b), FP8_AMAX_FLOOR, e4m3::MAX);
                let back = if faults.on("lost_act_scale") { 1.0 } else { s };
                for (o, &v) in o.iter_mut().zip(b) {
                    *o = e4m3::decode(e4m3::encode((v / s).clamp(-e4m3::MAX, e4m3::MAX))) * back;
                }
            }
        }
    });
}
