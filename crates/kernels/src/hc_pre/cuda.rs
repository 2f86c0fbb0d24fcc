//! CUDA `hc_pre`: one block per (row, slice of 256 values), pre weights in shared memory, an FMA chain over the streams per value.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most residual streams the kernel's shared-memory weights hold.
pub const MAX_HC: usize = 16;

/// Outputs of a row one block writes (the kernel's `SLICE`).
const SLICE: usize = 256;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_pre",
    source: include_str!("hc_pre.cu"),
    entries: &["hc_pre"],
    controls: &["race_no_sync", "drop_last_stream"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// `out[r] = sum_s pre[r, s] * x[r, s]` in stream order, on the GPU.
pub fn hc_pre_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    pre: impl Into<In<'a, f32>>,
    hc: usize,
    dim: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let pre = pre.into();
    let out = out.into();
    if hc == 0 || hc > MAX_HC {
        return Err(format!("hc_pre on CUDA: hc {hc} outside 1..={MAX_HC}"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_pre", faults)?;
    let rows = pre.len() / hc;
    let (xd, pd) = (gpu.stage(x)?, gpu.stage(pre)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&pd).arg(&mut yv).arg(&r).arg(&h).arg(&d);
        // SAFETY: the arguments match the kernel's signature; x holds `rows * hc * dim`, pre `rows * hc`, out `rows * dim`.
        cuda::launched("hc_pre", unsafe { b.launch(launch.config(rows * dim.div_ceil(SLICE))) })?;
    }
    y.finish(gpu)
}
