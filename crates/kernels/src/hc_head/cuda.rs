//! CUDA `hc_head`: one block per (row, slice of 512 outputs), the mixing dots in 256 fixed lanes apiece, sigmoid weights, an FMA chain over the streams.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most residual streams the kernel's shared-memory weights hold.
pub const MAX_HC: usize = 16;

/// Outputs of a row one block writes (the kernel's `SLICE`).
const SLICE: usize = 512;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_head",
    source: include_str!("hc_head.cu"),
    entries: &["hc_head"],
    controls: &["race_no_sync", "lost_rsqrt", "skip_last_row"],
    records: &[
        CudaLaunch::new(1024, 65_535),
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// The final mHC collapse of each row's `hc` streams of `dim` values, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_head_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    hc_fn: impl Into<In<'a, f32>>,
    base: impl Into<In<'a, f32>>,
    scale: f32,
    hc: usize,
    dim: usize,
    norm_eps: f32,
    hc_eps: f32,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let hc_fn = hc_fn.into();
    let base = base.into();
    let out = out.into();
    if hc == 0 || hc > MAX_HC {
        return Err(format!("hc_head on CUDA: hc {hc} outside 1..={MAX_HC}"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_head", faults)?;
    let rows = x.len() / (hc * dim);
    let (xd, fd, bd) = (gpu.stage(x)?, gpu.stage(hc_fn)?, gpu.stage(base)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&fd).input(&bd).arg(&mut yv).arg(&r).arg(&h).arg(&d);
        b.arg(&scale).arg(&norm_eps).arg(&hc_eps);
        // SAFETY: the arguments match the kernel's signature; x holds `rows * hc * dim`, hc_fn `hc * hc * dim`, out `rows * dim`.
        cuda::launched("hc_head", unsafe {
            b.launch(launch.config(rows * dim.div_ceil(SLICE)))
        })?;
    }
    y.finish(gpu)
}
