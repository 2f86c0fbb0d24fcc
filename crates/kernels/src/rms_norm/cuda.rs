//! CUDA `rms_norm`: one block per (row, slice of 256 values), each summing the row's squares of squares in 256 fixed lanes.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// Values of a row one block writes (the kernel's `SLICE`).
const SLICE: usize = 256;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "rms_norm",
    source: include_str!("rms_norm.cu"),
    entries: &["rms_norm"],
    controls: &["race_no_sync", "drop_last_element", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight` on the GPU.
pub fn rms_norm_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    weight: impl Into<In<'a, f32>>,
    eps: f32,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let weight = weight.into();
    let out = out.into();
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "rms_norm", faults)?;
    let dim = weight.len();
    let rows = x.len() / dim;
    let (xd, wd) = (gpu.stage(x)?, gpu.stage(weight)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, d) = (rows as i32, dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&wd).arg(&mut yv).arg(&r).arg(&d).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; every buffer holds what `rows` and `dim` index.
        cuda::launched("rms_norm", unsafe {
            b.launch(launch.config(rows * dim.div_ceil(SLICE)))
        })?;
    }
    y.finish(gpu)
}
