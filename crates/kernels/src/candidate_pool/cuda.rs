//! CUDA `candidate_pool`: one block per query row, block keys from warp 0 in shared memory, a rank count per block, the chosen blocks written in ascending order.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most score blocks per row the kernel's shared keys hold.
pub const MAX_BLOCKS: usize = 4096;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "candidate_pool",
    source: include_str!("candidate_pool.cu"),
    entries: &["candidate_pool"],
    controls: &["race_no_sync", "newest_not_forced"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// Per row the `top_blocks` best blocks of `block_size` scores (the newest always kept), ascending, padded with -1, on the GPU.
pub fn candidate_pool_cuda(
    launch: &CudaLaunch,
    scores: &[f32],
    num_visible: &[i32],
    block_size: usize,
    top_blocks: usize,
    out: &mut [i32],
    faults: Faults,
) -> Result<(), String> {
    let rows = num_visible.len();
    if rows == 0 || top_blocks == 0 {
        return Ok(());
    }
    let cols = scores.len() / rows;
    let most = num_visible
        .iter()
        .map(|&v| (v.max(0) as usize).min(cols))
        .max()
        .unwrap_or(0);
    if block_size == 0 || most.div_ceil(block_size) > MAX_BLOCKS {
        return Err(format!(
            "candidate_pool on CUDA: at most {MAX_BLOCKS} blocks of a positive block size per row"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "candidate_pool", faults)?;
    let (sd, vd) = (gpu.upload(scores)?, gpu.upload(num_visible)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, c, bs, top) = (rows as i32, cols as i32, block_size as i32, top_blocks as i32);
        let mut b = gpu.launch_builder(&f);
        b.arg(&sd).arg(&vd).arg(&mut yv).arg(&r).arg(&c).arg(&bs).arg(&top);
        // SAFETY: the arguments match the kernel's signature; scores hold `rows * cols` values, out `rows * top_blocks`.
        cuda::launched("candidate_pool", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
