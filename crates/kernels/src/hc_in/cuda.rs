//! CUDA `hc_in`: `hc_mix`'s blocks, the last block of each row then doing its split, `hc_pre` and `rms_norm_quant` in the same launch, its last warp making the Sinkhorn comb beside them.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_in",
    source: concat!(
        include_str!("../hc_mix/hc_mix.cu"),
        include_str!("../hc_split_sinkhorn/hc_split_sinkhorn.cu"),
        include_str!("../hc_pre/hc_pre.cu"),
        include_str!("../rms_norm/rms_norm.cu"),
        include_str!("hc_in.cu")
    ),
    entries: &["hc_in"],
    controls: &["race_no_sync", "lost_rsqrt", "skip_last_row", "lost_act_scale"],
    records: &[
        CudaLaunch::new(512, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(128, 65_535),
    ],
};

/// The largest hc the fused split takes (its one-warp Sinkhorn).
pub const MAX_HC: usize = 4;

/// The widest row the last block holds in shared memory (the kernel's `MAX_DIM`).
pub const MAX_DIM: usize = 8192;

/// The weights of one mHC-in mapping and the sub-block's norm.
pub struct HcInWeights<'a> {
    /// `[(2 + hc) * hc, hc * dim]`.
    pub hc_fn: In<'a, f32>,
    /// `[3]`: the pre, post and comb logit scales.
    pub scale: In<'a, f32>,
    /// `[(2 + hc) * hc]`.
    pub base: In<'a, f32>,
    /// `[dim]`: the norm's weight.
    pub norm: In<'a, f32>,
}

/// Everything `hc_in` writes, per row: the logits, the split, the collapse before and after its norm, and the norm's act_quant.
pub struct HcInOut<'a> {
    pub mix: Out<'a, f32>,
    pub pre: Out<'a, f32>,
    pub post: Out<'a, f32>,
    pub comb: Out<'a, f32>,
    pub y: Out<'a, f32>,
    pub yn: Out<'a, f32>,
    /// f16 e4m3 grid values, row stride `dim` rounded up to 8.
    pub q: Out<'a, u16>,
    /// One scale per 128 values of a row.
    pub scales: Out<'a, f32>,
}

/// The mHC-in chain `hc_mix`, `hc_split_sinkhorn`, `hc_pre`, `rms_norm_quant` over the streams `x` `[rows, hc, dim]` in one launch, with their bits.
#[allow(clippy::too_many_arguments)]
pub fn hc_in_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    w: HcInWeights<'a>,
    hc: usize,
    iters: usize,
    eps: f32,
    hc_eps: f32,
    out: HcInOut<'a>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let (dim, width) = (w.norm.len(), (2 + hc) * hc);
    let rows = x.len() / (hc * dim).max(1);
    let shapes = [
        (x.len(), rows * hc * dim),
        (w.hc_fn.len(), width * hc * dim),
        (w.scale.len(), 3),
        (w.base.len(), width),
        (out.mix.len(), rows * width),
        (out.pre.len(), rows * hc),
        (out.post.len(), rows * hc),
        (out.comb.len(), rows * hc * hc),
        (out.y.len(), rows * dim),
        (out.yn.len(), rows * dim),
        (out.q.len(), rows * dim.next_multiple_of(8)),
        (out.scales.len(), rows * dim.div_ceil(128)),
    ];
    if !(1..=MAX_HC).contains(&hc) || !(1..=MAX_DIM).contains(&dim) || iters == 0 || shapes.iter().any(|(a, b)| a != b)
    {
        return Err(format!(
            "hc_in on CUDA: hc {hc} (1..={MAX_HC}), dim {dim} (1..={MAX_DIM}), {iters} iterations and buffers {shapes:?} (length, wanted) do not make rows of [{hc}, {dim}]"
        ));
    }
    if launch.block < 64 || !launch.block.is_multiple_of(32) {
        return Err(format!(
            "hc_in on CUDA: blocks of {} threads; it needs whole warps, at least two (one makes comb beside the rest)",
            launch.block
        ));
    }
    if rows > cuda::COUNTS {
        return Err(format!(
            "hc_in on CUDA: {rows} rows, more than the {} its arrival counts hold; run the unfused chain",
            cuda::COUNTS
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_in", faults)?;
    let (xd, fd) = (gpu.stage(x)?, gpu.stage(w.hc_fn)?);
    let (sd, bd, nd) = (gpu.stage(w.scale)?, gpu.stage(w.base)?, gpu.stage(w.norm)?);
    let mut mix = gpu.stage_out(out.mix)?;
    let (mut pre, mut post, mut comb) = (
        gpu.stage_out(out.pre)?,
        gpu.stage_out(out.post)?,
        gpu.stage_out(out.comb)?,
    );
    let (mut y, mut yn) = (gpu.stage_out(out.y)?, gpu.stage_out(out.yn)?);
    let (mut q, mut scales) = (gpu.stage_out(out.q)?, gpu.stage_out(out.scales)?);
    {
        let (mut mv, mut pv, mut ov, mut cv) = (mix.view(), pre.view(), post.view(), comb.view());
        let (mut yv, mut nv, mut qv, mut sv) = (y.view(), yn.view(), q.view(), scales.view());
        let (r, h, d, it) = (rows as i32, hc as i32, dim as i32, iters as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&fd).input(&sd).input(&bd).input(&nd);
        b.arg(&mut mv).arg(&mut pv).arg(&mut ov).arg(&mut cv);
        b.arg(&mut yv).arg(&mut nv).arg(&mut qv).arg(&mut sv).arg(gpu.counts());
        b.arg(&r).arg(&h).arg(&d).arg(&it).arg(&eps).arg(&hc_eps);
        // SAFETY: the arguments match the kernel's signature; every length was checked above, and the counts hold `rows`.
        cuda::launched("hc_in", unsafe { b.launch(launch.config(rows * width)) })?;
    }
    mix.finish(gpu)?;
    pre.finish(gpu)?;
    post.finish(gpu)?;
    comb.finish(gpu)?;
    y.finish(gpu)?;
    yn.finish(gpu)?;
    q.finish(gpu)?;
    scales.finish(gpu)
}
