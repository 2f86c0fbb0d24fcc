//! CUDA `hc_head`: one block per row, hc_mix's half-warp dots for the gates, then hc_pre's FMA chain (the CPU's bits).

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most streams the kernel's shared gates hold.
pub const MAX_HC: usize = 16;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_head",
    source: include_str!("hc_head.cu"),
    entries: &["hc_head"],
    controls: &["race_no_sync", "lost_rsqrt", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(512, 65_535),
    ],
};

/// `out[r] = sum_i pre_i * x[r, i]` with `pre = sigmoid(mix * rsqrt(mean(x^2) + norm_eps) * scale + base) + hc_eps`, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_head_cuda(
    launch: &CudaLaunch,
    x: &[f32],
    hc_fn: &[f32],
    base: &[f32],
    scale: f32,
    (hc, dim): (usize, usize),
    (norm_eps, hc_eps): (f32, f32),
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let hc_dim = hc * dim;
    if !(1..=MAX_HC).contains(&hc) || dim == 0 || hc_fn.len() != hc * hc_dim || base.len() != hc || x.len() % hc_dim != 0 {
        return Err(format!(
            "hc_head on CUDA: hc {hc} must be in 1..={MAX_HC}, hc_fn [{hc}, {hc_dim}], base [{hc}], x whole rows of {hc_dim}"
        ));
    }
    let rows = x.len() / hc_dim;
    if out.len() != rows * dim {
        return Err(format!("hc_head on CUDA: out must be [{rows}, {dim}]"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_head", faults)?;
    let (xd, fd, bd) = (gpu.upload(x)?, gpu.upload(hc_fn)?, gpu.upload(base)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&xd).arg(&fd).arg(&bd).arg(&mut yv).arg(&r).arg(&h).arg(&d);
        b.arg(&scale).arg(&norm_eps).arg(&hc_eps);
        // SAFETY: the arguments match the kernel's signature; every buffer holds what rows, hc and dim index, checked above.
        cuda::launched("hc_head", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
