//! CUDA `hc_split_sinkhorn`: one block per row, one warp per comb row then per column in each Sinkhorn pass.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_split_sinkhorn",
    source: include_str!("hc_split_sinkhorn.cu"),
    entries: &["hc_split_sinkhorn"],
    controls: &["race_no_sync", "lost_comb_scale", "skip_last_row"],
    records: &[
        CudaLaunch::new(512, 65_535),
        CudaLaunch::new(512, 1),
        CudaLaunch::new(128, 7),
    ],
};

/// Splits each row's mixing logits into pre, post and the Sinkhorn-normalised comb, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_split_sinkhorn_cuda(
    launch: &CudaLaunch,
    mix: &[f32],
    scale: &[f32],
    base: &[f32],
    hc: usize,
    iters: usize,
    eps: f32,
    pre: &mut [f32],
    post: &mut [f32],
    comb: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if hc == 0 || hc > super::MAX_HC || iters == 0 {
        return Err(format!(
            "hc_split_sinkhorn on CUDA: hc {hc} outside 1..={}, iters {iters}",
            super::MAX_HC
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_split_sinkhorn", faults)?;
    let rows = mix.len() / ((2 + hc) * hc);
    let (md, sd, bd) = (gpu.upload(mix)?, gpu.upload(scale)?, gpu.upload(base)?);
    let (mut pd, mut qd, mut cd) = (gpu.output(pre)?, gpu.output(post)?, gpu.output(comb)?);
    {
        let (mut pv, mut qv, mut cv) = (pd.view(), qd.view(), cd.view());
        let (r, h, it) = (rows as i32, hc as i32, iters as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&md).arg(&sd).arg(&bd).arg(&mut pv).arg(&mut qv).arg(&mut cv);
        b.arg(&r).arg(&h).arg(&it).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; pre and post hold `rows * hc`, comb `rows * hc * hc` values.
        cuda::launched("hc_split_sinkhorn", unsafe { b.launch(launch.config(rows)) })?;
    }
    pd.finish(gpu, pre)?;
    qd.finish(gpu, post)?;
    cd.finish(gpu, comb)
}
