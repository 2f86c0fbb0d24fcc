//! CUDA `hc_split_sinkhorn`: one block per row, warp 0 does the gates and Sinkhorn passes in the CPU's scalar order (the CPU's bits).

use cudarc::driver::PushKernelArg;

use super::MAX_HC;
use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_split_sinkhorn",
    source: include_str!("hc_split_sinkhorn.cu"),
    entries: &["hc_split_sinkhorn"],
    controls: &["race_no_sync", "lost_comb_scale", "transposed_comb", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(128, 65_535),
    ],
};

/// Splits `mix` rows [(2 + hc) * hc] into `pre` [hc], `post` [hc] and the Sinkhorn-projected `comb` [hc, hc], on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_split_sinkhorn_cuda(
    launch: &CudaLaunch,
    mix: &[f32],
    scale: &[f32],
    base: &[f32],
    (hc, iters, eps): (usize, usize, f32),
    pre: &mut [f32],
    post: &mut [f32],
    comb: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let width = (2 + hc) * hc;
    if !(1..=MAX_HC).contains(&hc)
        || iters == 0
        || scale.len() != 3
        || base.len() != width
        || !mix.len().is_multiple_of(width)
    {
        return Err(format!(
            "hc_split_sinkhorn on CUDA: hc {hc} must be in 1..={MAX_HC}, iters at least 1, scale [3], base and mix rows [{width}]"
        ));
    }
    let rows = mix.len() / width;
    if (pre.len(), post.len(), comb.len()) != (rows * hc, rows * hc, rows * hc * hc) {
        return Err(format!(
            "hc_split_sinkhorn on CUDA: pre and post must be [{rows}, {hc}], comb [{rows}, {hc}, {hc}]"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_split_sinkhorn", faults)?;
    let (md, sd, bd) = (gpu.upload(mix)?, gpu.upload(scale)?, gpu.upload(base)?);
    let (mut pd, mut qd, mut cd) = (gpu.output(pre)?, gpu.output(post)?, gpu.output(comb)?);
    {
        let (mut pv, mut qv, mut cv) = (pd.view(), qd.view(), cd.view());
        let (r, h, n) = (rows as i32, hc as i32, iters as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&md).arg(&sd).arg(&bd).arg(&mut pv).arg(&mut qv).arg(&mut cv);
        b.arg(&r).arg(&h).arg(&n).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; every buffer holds what rows and hc index, checked above.
        cuda::launched("hc_split_sinkhorn", unsafe { b.launch(launch.config(rows)) })?;
    }
    pd.finish(gpu, pre)?;
    qd.finish(gpu, post)?;
    cd.finish(gpu, comb)
}
