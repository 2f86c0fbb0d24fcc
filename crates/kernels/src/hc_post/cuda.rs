//! CUDA `hc_post`: one block per (row, slice of 256 outputs), comb and post in shared memory, an FMA chain per value in the CPU's term order.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most residual streams the kernel's shared-memory weights hold.
pub const MAX_HC: usize = 16;

/// Outputs of a row one block writes (the kernel's `SLICE`).
const SLICE: usize = 256;

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
pub fn hc_post_cuda<'a>(
    launch: &CudaLaunch,
    f: impl Into<In<'a, f32>>,
    x: impl Into<In<'a, f32>>,
    post: impl Into<In<'a, f32>>,
    comb: impl Into<In<'a, f32>>,
    hc: usize,
    dim: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let f = f.into();
    let x = x.into();
    let post = post.into();
    let comb = comb.into();
    let out = out.into();
    if hc == 0 || hc > MAX_HC {
        return Err(format!("hc_post on CUDA: hc {hc} outside 1..={MAX_HC}"));
    }
    let gpu = cuda::gpu()?;
    let func = gpu.function(&KERNEL, "hc_post", faults)?;
    let rows = post.len() / hc;
    let (fd, xd, pd, cd) = (gpu.stage(f)?, gpu.stage(x)?, gpu.stage(post)?, gpu.stage(comb)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.launch_builder(&func);
        b.input(&fd)
            .input(&xd)
            .input(&pd)
            .input(&cd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&h)
            .arg(&d);
        // SAFETY: the arguments match the kernel's signature; the buffers hold the shapes hc_post documents.
        cuda::launched("hc_post", unsafe {
            b.launch(launch.config(rows * (hc * dim).div_ceil(SLICE)))
        })?;
    }
    y.finish(gpu)
}
