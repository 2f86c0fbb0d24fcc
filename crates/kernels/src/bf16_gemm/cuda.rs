//! CUDA `bf16_gemm`: 64x128 tensor-core tiles (x split exactly into three bf16 pieces), K in fixed 32-wide stages, so every row's bits are the same at any batch size.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out, PushIn};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "bf16_gemm",
    source: concat!(include_str!("../cuda/mma.cuh"), include_str!("bf16_gemm.cu")),
    entries: &["bf16_gemm"],
    controls: &["race_no_sync", "drop_tail", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(256, 7),
    ],
};

/// `out[r, j] = x[r] . w[j]` for `n` bf16 weight rows of `k` values, on the GPU.
pub fn bf16_gemm_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    w: impl Into<In<'a, u16>>,
    n: usize,
    k: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let w = w.into();
    let out = out.into();
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "bf16_gemm", faults)?;
    let m = x.len() / k;
    let (xd, wd) = (gpu.stage(x)?, gpu.stage(w)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (mm, nn, kk) = (m as i32, n as i32, k as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.input(&xd).input(&wd).arg(&mut yv).arg(&mm).arg(&nn).arg(&kk);
        let tiles = n.div_ceil(128) * m.div_ceil(64);
        // SAFETY: the arguments match the kernel's signature; x holds `m * k`, w `n * k` and out `m * n` values.
        cuda::launched("bf16_gemm", unsafe { b.launch(launch.config(tiles)) })?;
    }
    y.finish(gpu)
}
