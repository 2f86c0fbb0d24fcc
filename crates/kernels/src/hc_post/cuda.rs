//! CUDA `hc_post`: one block per row, comb and post in shared memory, an FMA chain per value in the CPU's term order.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most residual streams the kernel's shared-memory weights hold.
pub const MAX_HC: usize = 16;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_post",
    source: include_str!("hc_post.cu"),
    entries: &["hc_post"],
    controls: &["race_no_sync", "comb_not_transposed", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// `out[r, j] = sum_s comb[r, s, j] * x[r, s] + post[r, j] * f[r]` on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_post_cuda(
    launch: &CudaLaunch,
    f: &[f32],
    x: &[f32],
    post: &[f32],
    comb: &[f32],
    hc: usize,
    dim: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if hc == 0 || hc > MAX_HC {
        return Err(format!("hc_post on CUDA: hc {hc} outside 1..={MAX_HC}"));
    }
    let gpu = cuda::gpu()?;
    let func = gpu.function(&KERNEL, "hc_post", faults)?;
    let rows = post.len() / hc;
    let (fd, xd, pd, cd) = (gpu.upload(f)?, gpu.upload(x)?, gpu.upload(post)?, gpu.upload(comb)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.stream.launch_builder(&func);
        b.arg(&fd)
            .arg(&xd)
            .arg(&pd)
            .arg(&cd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&h)
            .arg(&d);
        // SAFETY: the arguments match the kernel's signature; the buffers hold the shapes hc_post documents.
        cuda::launched("hc_post", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
