//! CUDA `hc_split_sinkhorn`: one block per row, one warp per comb row then per column in each Sinkhorn pass.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
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
pub fn hc_split_sinkhorn_cuda<'a>(
    launch: &CudaLaunch,
    mix: impl Into<In<'a, f32>>,
    scale: impl Into<In<'a, f32>>,
    base: impl Into<In<'a, f32>>,
    hc: usize,
    iters: usize,
    eps: f32,
    pre: impl Into<Out<'a, f32>>,
    post: impl Into<Out<'a, f32>>,
    comb: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let mix = mix.into();
    let scale = scale.into();
    let base = base.into();
    let pre = pre.into();
    let post = post.into();
    let comb = comb.into();
    if hc == 0 || hc > super::MAX_HC || iters == 0 {
        return Err(format!(
            "hc_split_sinkhorn on CUDA: hc {hc} outside 1..={}, iters {iters}",
            super::MAX_HC
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_split_sinkhorn", faults)?;
    let rows = mix.len() / ((2 + hc) * hc);
    let (md, sd, bd) = (gpu.stage(mix)?, gpu.stage(scale)?, gpu.stage(base)?);
    let (mut pd, mut qd, mut cd) = (gpu.stage_out(pre)?, gpu.stage_out(post)?, gpu.stage_out(comb)?);
    {
        let (mut pv, mut qv, mut cv) = (pd.view(), qd.view(), cd.view());
        let (r, h, it) = (rows as i32, hc as i32, iters as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&md)
            .input(&sd)
            .input(&bd)
            .arg(&mut pv)
            .arg(&mut qv)
            .arg(&mut cv);
        b.arg(&r).arg(&h).arg(&it).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; pre and post hold `rows * hc`, comb `rows * hc * hc` values.
        cuda::launched("hc_split_sinkhorn", unsafe { b.launch(launch.config(rows)) })?;
    }
    pd.finish(gpu)?;
    qd.finish(gpu)?;
    cd.finish(gpu)
}
