//! CUDA `swiglu`: one block per row, the route weight broadcast through shared memory.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "swiglu",
    source: include_str!("swiglu.cu"),
    entries: &["swiglu"],
    controls: &["race_no_sync", "no_up_clamp", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `out = w * (silu(min(g, limit)) * clamp(u, -limit, limit))` per row, on the GPU.
pub fn swiglu_cuda<'a>(
    launch: &CudaLaunch,
    gate: impl Into<In<'a, f32>>,
    up: impl Into<In<'a, f32>>,
    route_weight: impl Into<In<'a, f32>>,
    limit: f32,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let gate = gate.into();
    let up = up.into();
    let route_weight = route_weight.into();
    let out = out.into();
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "swiglu", faults)?;
    let rows = route_weight.len();
    let inter = gate.len() / rows.max(1);
    let (gd, ud, wd) = (gpu.stage(gate)?, gpu.stage(up)?, gpu.stage(route_weight)?);
    let mut h = gpu.stage_out(out)?;
    {
        let mut hv = h.view();
        let (r, n) = (rows as i32, inter as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&gd)
            .input(&ud)
            .input(&wd)
            .arg(&mut hv)
            .arg(&r)
            .arg(&n)
            .arg(&limit);
        // SAFETY: the arguments match the kernel's signature; gate, up and out hold `rows * inter` values.
        cuda::launched("swiglu", unsafe {
            b.launch(launch.config(rows * inter.div_ceil(launch.block as usize)))
        })?;
    }
    h.finish(gpu)
}
