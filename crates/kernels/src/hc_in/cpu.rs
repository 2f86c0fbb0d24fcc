//! CPU `hc_in`: the chain it fuses, kernel by kernel: `hc_mix`, `hc_split_sinkhorn`, `hc_pre`, `rms_norm_quant`.

use crate::cpu::CpuLaunch;
use crate::faults::Faults;
use crate::hc_mix::hc_mix;
use crate::hc_pre::hc_pre;
use crate::hc_split_sinkhorn::hc_split_sinkhorn;
use crate::rms_norm_quant::rms_norm_quant;

/// What `hc_in` writes per row: the split, and the normed collapse with its act_quant round trip.
pub struct HcInRows<'a> {
    pub pre: &'a mut [f32],
    pub post: &'a mut [f32],
    pub comb: &'a mut [f32],
    pub y: &'a mut [f32],
    pub yq: &'a mut [f32],
}

/// mHC in over the streams `x` `[rows, hc, dim]`: the mapping's split, and `rms_norm(pre . X) * norm` with its round trip.
#[allow(clippy::too_many_arguments)]
pub fn hc_in(
    x: &[f32],
    [hc_fn, scale, base, norm]: [&[f32]; 4],
    hc: usize,
    iters: usize,
    [eps, hc_eps]: [f32; 2],
    out: HcInRows<'_>,
    launch: &CpuLaunch,
    faults: Faults,
) {
    let dim = norm.len();
    let rows = out.pre.len() / hc.max(1);
    let mut mix = vec![0.0; rows * (2 + hc) * hc];
    hc_mix(x, hc_fn, hc * dim, eps, &mut mix, launch, faults);
    hc_split_sinkhorn(
        &mix, scale, base, hc, iters, hc_eps, out.pre, out.post, out.comb, launch, faults,
    );
    let mut collapsed = vec![0.0; rows * dim];
    hc_pre(x, out.pre, hc, dim, &mut collapsed, launch, faults);
    rms_norm_quant(&collapsed, norm, eps, out.y, out.yq, launch, faults);
}
