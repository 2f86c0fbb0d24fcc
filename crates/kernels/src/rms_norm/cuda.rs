//! CUDA `rms_norm`: one block per row, the sum of squares in 256 fixed lanes.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

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
pub fn rms_norm_cuda(
    launch: &CudaLaunch,
    x: &[f32],
    weight: &[f32],
    eps: f32,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "rms_norm", faults)?;
    let dim = weight.len();
    let rows = x.len() / dim;
    let (xd, wd) = (gpu.upload(x)?, gpu.upload(weight)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, d) = (rows as i32, dim as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&xd).arg(&wd).arg(&mut yv).arg(&r).arg(&d).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; every buffer holds what `rows` and `dim` index.
        cuda::launched("rms_norm", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
