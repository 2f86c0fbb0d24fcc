//! CUDA `logits_argmax`: one block a row, each thread's share of it, then the warps' and the block's best by one total order.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "logits_argmax",
    source: include_str!("logits_argmax.cu"),
    entries: &["logits_argmax"],
    controls: &["race_no_sync", "ties_to_last", "nan_wins"],
    records: &[
        CudaLaunch::new(1024, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(32, 65_535),
    ],
};

/// Each `vocab`-wide row's greedy pick of `logits` into `out` (an f32 id a row) on the GPU.
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
    let f = gpu.function(&KERNEL, "logits_argmax", faults)?;
    let rows = x.len() / vocab;
    let xd = gpu.stage(x)?;
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, v) = (rows as i32, vocab as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).arg(&mut yv).arg(&r).arg(&v);
        // SAFETY: the arguments match the kernel's signature; x holds `rows * vocab` values and out `rows`.
        cuda::launched("logits_argmax", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
