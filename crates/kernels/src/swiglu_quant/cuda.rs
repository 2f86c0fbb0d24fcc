//! CUDA `swiglu_quant`: `swiglu`'s values a block per (row, slice of 256), each block act_quant'ing its own slice afterwards (as `fp8_gemm_quant` writes them).

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// Values of a row one block writes (the kernel's `QSLICE`).
const SLICE: usize = 256;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "swiglu_quant",
    source: concat!(include_str!("../swiglu/swiglu.cu"), include_str!("swiglu_quant.cu")),
    entries: &["swiglu_quant"],
    controls: &["race_no_sync", "lost_act_scale", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `h = w * (silu(min(g, limit)) * clamp(u, -limit, limit))` per row, `q` its e4m3 grid values as f16 (row stride rounded up to 8) and `q_scale` a scale per 128 values of a row, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn swiglu_quant_cuda<'a>(
    launch: &CudaLaunch,
    gate: impl Into<In<'a, f32>>,
    up: impl Into<In<'a, f32>>,
    route_weight: impl Into<In<'a, f32>>,
    limit: f32,
    h: impl Into<Out<'a, f32>>,
    q: impl Into<Out<'a, u16>>,
    q_scale: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let (gate, up, route_weight) = (gate.into(), up.into(), route_weight.into());
    let (h, q, q_scale) = (h.into(), q.into(), q_scale.into());
    let rows = route_weight.len();
    let inter = gate.len() / rows.max(1);
    if rows == 0
        || inter == 0
        || gate.len() != rows * inter
        || up.len() != gate.len()
        || h.len() != gate.len()
        || q.len() != rows * inter.next_multiple_of(8)
        || q_scale.len() != rows * inter.div_ceil(128)
    {
        return Err(format!(
            "swiglu_quant on CUDA: {} gate, {} up, {} outputs, {} codes and {} scales do not make {rows} rows",
            gate.len(),
            up.len(),
            h.len(),
            q.len(),
            q_scale.len()
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "swiglu_quant", faults)?;
    let (gd, ud, wd) = (gpu.stage(gate)?, gpu.stage(up)?, gpu.stage(route_weight)?);
    let (mut hd, mut qd, mut sd) = (gpu.stage_out(h)?, gpu.stage_out(q)?, gpu.stage_out(q_scale)?);
    {
        let (mut hv, mut qv, mut sv) = (hd.view(), qd.view(), sd.view());
        let (r, n) = (rows as i32, inter as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&gd)
            .input(&ud)
            .input(&wd)
            .arg(&mut hv)
            .arg(&mut qv)
            .arg(&mut sv)
            .arg(&r)
            .arg(&n)
            .arg(&limit);
        // SAFETY: the arguments match the kernel's signature; the lengths were checked above.
        cuda::launched("swiglu_quant", unsafe {
            b.launch(launch.config(rows * inter.div_ceil(SLICE)))
        })?;
    }
    hd.finish(gpu)?;
    qd.finish(gpu)?;
    sd.finish(gpu)
}
