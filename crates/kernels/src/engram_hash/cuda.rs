//! CUDA `engram_hash`: one block per token row, the row's n-gram xor chain in shared memory, one thread per hash head.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The longest n-gram the kernel's shared chain holds.
pub const MAX_NGRAM: usize = 8;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "engram_hash",
    source: include_str!("engram_hash.cu"),
    entries: &["engram_hash"],
    controls: &["race_no_sync", "no_offset"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// Table rows of each row's hash heads, `[rows, (max_ngram - 1) * n_heads]`, on the GPU (block sizes of at least 64 threads).
pub fn engram_hash_cuda(
    launch: &CudaLaunch,
    tokens: &[i32],
    multipliers: &[u64],
    primes: &[i32],
    n_heads: usize,
    out: &mut [i32],
    faults: Faults,
) -> Result<(), String> {
    let max_ngram = multipliers.len();
    if !(2..=MAX_NGRAM).contains(&max_ngram) || launch.block < 64 || primes.iter().any(|&p| p <= 0) {
        return Err(format!(
            "engram_hash on CUDA: 2..={MAX_NGRAM} multipliers, positive primes and blocks of at least 64 threads"
        ));
    }
    let offsets: Vec<u64> = primes
        .iter()
        .scan(0u64, |acc, &p| {
            let start = *acc;
            *acc += p as u64;
            Some(start)
        })
        .collect();
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "engram_hash", faults)?;
    let rows = tokens.len() / max_ngram;
    let (td, md) = (gpu.upload(tokens)?, gpu.upload(multipliers)?);
    let (pd, od) = (gpu.upload(primes)?, gpu.upload(&offsets)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, n, h) = (rows as i32, max_ngram as i32, n_heads as i32);
        let mut b = gpu.launch_builder(&f);
        b.arg(&td)
            .arg(&md)
            .arg(&pd)
            .arg(&od)
            .arg(&mut yv)
            .arg(&r)
            .arg(&n)
            .arg(&h);
        // SAFETY: the arguments match the kernel's signature; tokens hold `rows * max_ngram`, out `rows * heads` values.
        cuda::launched("engram_hash", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
