//! CUDA `hc_mix`: one block per row, one half-warp per dot with the CPU's 16 lanes (the CPU's bits).

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most mix outputs per row the kernel's shared memory holds (V4: (2 + hc) * hc = 24).
pub const MAX_MIX: usize = 64;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_mix",
    source: include_str!("hc_mix.cu"),
    entries: &["hc_mix"],
    controls: &["race_no_sync", "lost_rsqrt", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(512, 65_535),
    ],
};

/// `out[r, m] = (x[r] . hc_fn[m]) * rsqrt(mean(x[r]^2) + eps)`, on the GPU.
pub fn hc_mix_cuda(
    launch: &CudaLaunch,
    x: &[f32],
    hc_fn: &[f32],
    hc_dim: usize,
    eps: f32,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if hc_dim == 0 || hc_fn.len() % hc_dim != 0 || x.len() % hc_dim != 0 {
        return Err(format!(
            "hc_mix on CUDA: x and hc_fn must be whole rows of {hc_dim}"
        ));
    }
    let (mix, rows) = (hc_fn.len() / hc_dim, x.len() / hc_dim);
    if mix > MAX_MIX || out.len() != rows * mix {
        return Err(format!(
            "hc_mix on CUDA: {mix} mix rows (at most {MAX_MIX}) and the output [{rows}, {mix}]"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_mix", faults)?;
    let (xd, fd) = (gpu.upload(x)?, gpu.upload(hc_fn)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, n, m) = (rows as i32, hc_dim as i32, mix as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&xd).arg(&fd).arg(&mut yv).arg(&r).arg(&n).arg(&m).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; x, hc_fn and out hold what rows, hc_dim and mix index, checked above.
        cuda::launched("hc_mix", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
