//! CUDA `logits_argmax`: a block's best of each part of a row, then a block a row over the parts, each best by one total order.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "logits_argmax",
    source: include_str!("logits_argmax.cu"),
    entries: &["logits_argmax_part", "logits_argmax"],
    controls: &["race_no_sync", "ties_to_last", "nan_wins"],
    records: &[
        CudaLaunch::new(1024, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(32, 65_535),
    ],
};

/// Ids of a row one block of the first pass takes.
pub const SPAN: usize = 4096;

/// Each `vocab`-wide row's greedy pick of `logits` into `out` (an f32 id a row) on the GPU: a block's best of each `SPAN` ids, then each row's best of those.
pub fn logits_argmax_cuda<'a>(
    launch: &CudaLaunch,
    logits: impl Into<In<'a, f32>>,
    vocab: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let (x, out) = (logits.into(), out.into());
    if vocab == 0 || vocab >= 1 << 24 || !launch.block.is_multiple_of(32) {
        return Err(format!(
            "logits_argmax on CUDA: vocab {vocab} must be 1 to 2^24 - 1 and the block ({}) whole warps",
            launch.block
        ));
    }
    let gpu = cuda::gpu()?;
    let (part, last) = (
        gpu.function(&KERNEL, "logits_argmax_part", faults)?,
        gpu.function(&KERNEL, "logits_argmax", faults)?,
    );
    let (rows, parts) = (x.len() / vocab, vocab.div_ceil(SPAN));
    let xd = gpu.stage(x)?;
    let (mut pv, mut pi) = (gpu.scratch::<f32>(rows * parts)?, gpu.scratch::<i32>(rows * parts)?);
    let (r, v, p, s) = (rows as i32, vocab as i32, parts as i32, SPAN as i32);
    {
        let mut b = gpu.launch_builder(&part);
        b.input(&xd).arg(&mut pv).arg(&mut pi).arg(&r).arg(&v).arg(&p).arg(&s);
        // SAFETY: the arguments match the kernel's signature; x holds `rows * vocab` values, pv and pi `rows * parts`.
        cuda::launched("logits_argmax_part", unsafe { b.launch(launch.config(rows * parts)) })?;
    }
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let mut b = gpu.launch_builder(&last);
        b.arg(&pv).arg(&pi).arg(&mut yv).arg(&r).arg(&p);
        // SAFETY: the arguments match the kernel's signature; pv and pi hold `rows * parts` candidates and out `rows`.
        cuda::launched("logits_argmax", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
