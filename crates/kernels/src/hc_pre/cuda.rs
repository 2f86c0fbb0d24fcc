//! CUDA `hc_pre`: one block per row, the stream weights in shared memory, one FMA chain per element (the CPU's bits).

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most streams the kernel's shared weights hold.
pub const MAX_HC: usize = 16;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_pre",
    source: include_str!("hc_pre.cu"),
    entries: &["hc_pre"],
    controls: &["race_no_sync", "drop_last_stream", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `y[r] = sum_i pre[r, i] * x[r, i]` over `hc` streams of `dim` values, on the GPU.
pub fn hc_pre_cuda(
    launch: &CudaLaunch,
    x: &[f32],
    pre: &[f32],
    hc: usize,
    dim: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if !(1..=MAX_HC).contains(&hc) || pre.len() % hc != 0 {
        return Err(format!(
            "hc_pre on CUDA: hc {hc} must be in 1..={MAX_HC} and pre whole rows of it"
        ));
    }
    let rows = pre.len() / hc;
    if x.len() != rows * hc * dim || out.len() != rows * dim {
        return Err(format!(
            "hc_pre on CUDA: x must be [{rows}, {hc}, {dim}] and out [{rows}, {dim}]"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_pre", faults)?;
    let (xd, pd) = (gpu.upload(x)?, gpu.upload(pre)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&xd).arg(&pd).arg(&mut yv).arg(&r).arg(&h).arg(&d);
        // SAFETY: the arguments match the kernel's signature; x, pre and out hold what rows, hc and dim index, checked above.
        cuda::launched("hc_pre", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
