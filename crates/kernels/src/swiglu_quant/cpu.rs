//! CPU `swiglu_quant`: `swiglu`, then each row's 128-blocks FP8 round-tripped as DeepSeek's act_quant does.

use crate::cpu::CpuLaunch;
use crate::faults::Faults;
use crate::rms_norm_quant::round_trip_rows;
use crate::swiglu::swiglu;

/// `h = swiglu(gate, up) * route_weight` per row and `hq` its act_quant round trip, `e4m3(h / s) * s` per 128 values of a row.
#[allow(clippy::too_many_arguments)]
pub fn swiglu_quant(
    gate: &[f32],
    up: &[f32],
    route_weight: &[f32],
    limit: f32,
    h: &mut [f32],
    hq: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert_eq!(h.len(), hq.len(), "swiglu_quant: outputs differ in length");
    swiglu(gate, up, route_weight, limit, h, launch, faults);
    if route_weight.is_empty() {
        return;
    }
    round_trip_rows(h, h.len() / route_weight.len(), hq, launch, faults);
}
