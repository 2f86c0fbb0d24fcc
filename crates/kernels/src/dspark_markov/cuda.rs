//! CUDA `dspark_markov`: one block per draft row, the Markov embedding in shared memory, one warp per vocab entry.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The largest Markov rank the kernel's shared embedding holds.
pub const MAX_RANK: usize = 1024;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "dspark_markov",
    source: include_str!("dspark_markov.cu"),
    entries: &["dspark_markov"],
    controls: &["race_no_sync", "prev_off_by_one"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `logits[r, v] += head[v] . embed[prev[r]]` on the GPU; a previous token outside the vocab gives NaN.
pub fn dspark_markov_cuda(
    launch: &CudaLaunch,
    embed: &[u8],
    head: &[u8],
    rank: usize,
    prev: &[i32],
    logits: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if rank == 0 || rank > MAX_RANK {
        return Err(format!("dspark_markov on CUDA: rank {rank} outside 1..={MAX_RANK}"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "dspark_markov", faults)?;
    let vocab = embed.len() / (2 * rank);
    let (ed, hd, pd) = (gpu.upload(embed)?, gpu.upload(head)?, gpu.upload(prev)?);
    let mut y = gpu.output(logits)?;
    {
        let mut yv = y.view();
        let (r, v, k) = (prev.len() as i32, vocab as i32, rank as i32);
        let mut b = gpu.launch_builder(&f);
        b.arg(&ed).arg(&hd).arg(&pd).arg(&mut yv).arg(&r).arg(&v).arg(&k);
        // SAFETY: the arguments match the kernel's signature; logits hold `rows * vocab` values, both tables `vocab * rank` bf16.
        cuda::launched("dspark_markov", unsafe { b.launch(launch.config(prev.len())) })?;
    }
    y.finish(gpu, logits)
}
