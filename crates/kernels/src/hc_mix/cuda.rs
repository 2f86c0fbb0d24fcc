//! CUDA `hc_mix`: one block per row and mixing logit, the dot and the sum of squares side by side in 256 fixed lanes each, then times rsqrt(mean(x^2) + eps).

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;
use crate::fp8_gemm::DECODE_ROWS;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_mix",
    source: include_str!("hc_mix.cu"),
    entries: &["hc_mix", "hc_mix_rows"],
    controls: &["race_no_sync", "lost_rsqrt", "skip_last_row"],
    records: &[
        CudaLaunch::new(512, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(256, 65_535),
    ],
};

/// `out[r, m] = (x[r] . hc_fn[m]) / sqrt(mean(x[r]^2) + eps)` on the GPU.
pub fn hc_mix_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    hc_fn: impl Into<In<'a, f32>>,
    hc_dim: usize,
    eps: f32,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let hc_fn = hc_fn.into();
    let out = out.into();
    let mix = hc_fn.len() / hc_dim;
    let gpu = cuda::gpu()?;
    let rows = x.len() / hc_dim;
    let entry = if rows <= DECODE_ROWS { "hc_mix_rows" } else { "hc_mix" };
    let f = gpu.function(&KERNEL, entry, faults)?;
    let (xd, fd) = (gpu.stage(x)?, gpu.stage(hc_fn)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, d, m) = (rows as i32, hc_dim as i32, mix as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&fd).arg(&mut yv).arg(&r).arg(&d).arg(&m).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; x holds `rows * hc_dim`, hc_fn `mix * hc_dim`, out `rows * mix`.
        cuda::launched(entry, unsafe { b.launch(launch.config(rows * mix)) })?;
    }
    y.finish(gpu)
}
