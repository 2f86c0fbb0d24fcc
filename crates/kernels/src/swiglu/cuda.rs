//! CUDA `swiglu`: one block per row, the route weight broadcast through shared memory.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
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
pub fn swiglu_cuda(
    launch: &CudaLaunch,
    gate: &[f32],
    up: &[f32],
    route_weight: &[f32],
    limit: f32,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "swiglu", faults)?;
    let rows = route_weight.len();
    let inter = gate.len() / rows.max(1);
    let (gd, ud, wd) = (gpu.upload(gate)?, gpu.upload(up)?, gpu.upload(route_weight)?);
    let mut h = gpu.output(out)?;
    {
        let mut hv = h.view();
        let (r, n) = (rows as i32, inter as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&gd).arg(&ud).arg(&wd).arg(&mut hv).arg(&r).arg(&n).arg(&limit);
        // SAFETY: the arguments match the kernel's signature; gate, up and out hold `rows * inter` values.
        cuda::launched("swiglu", unsafe { b.launch(launch.config(rows)) })?;
    }
    h.finish(gpu, out)
}
