//! CUDA `bf16_gemm`: 64x128 tensor-core tiles (x split exactly into three bf16 pieces), K in fixed 32-wide stages, so every row's bits are the same at any batch size; decode rows split the stages over warps.

use cudarc::driver::LaunchConfig;

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;
use crate::fp8_gemm::DECODE_ROWS;

/// The most per-stage partials the split decode entry stores.
const MAX_PARTS: usize = 1 << 22;

/// Most threads a block of the chain entry (its launch bounds).
const CHAIN_BLOCK: u32 = 256;

/// Decode outputs of fewer 16-column tiles than this split the stages over warps.
const SPLIT_BELOW: usize = 1024;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "bf16_gemm",
    source: concat!(include_str!("../cuda/mma.cuh"), include_str!("bf16_gemm.cu")),
    entries: &["bf16_gemm", "bf16_gemm_rows", "bf16_gemm_chain"],
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
    let m = x.len() / k;
    let (xd, wd) = (gpu.stage(x)?, gpu.stage(w)?);
    let mut y = gpu.stage_out(out)?;
    let (mm, nn, kk) = (m as i32, n as i32, k as i32);
    let stages = k.div_ceil(32);
    if m <= DECODE_ROWS {
        // Decode: few columns split the stages over warps (then each output's chain in stage order); many take a warp per 16 columns.
        let tiles = n.div_ceil(16);
        let split = tiles < SPLIT_BELOW && stages * m * n <= MAX_PARTS;
        let rows = gpu.function(&KERNEL, "bf16_gemm_rows", faults)?;
        // Split launches write every partial before the chain reads it; unsplit ones never touch parts.
        let mut parts = gpu.scratch::<f32>(if split { stages * m * n } else { 1 })?;
        {
            let mut yv = y.view();
            let sp = split as i32;
            let mut b = gpu.launch_builder(&rows);
            b.input(&xd)
                .input(&wd)
                .arg(&mut parts)
                .arg(&mut yv)
                .arg(&mm)
                .arg(&nn)
                .arg(&kk)
                .arg(&sp);
            let warps = if split { tiles * stages } else { tiles };
            // SAFETY: the arguments match the kernel's signature; parts holds `stages * m * n` values when split, y `m * n`.
            cuda::launched("bf16_gemm_rows", unsafe { b.launch(launch.config(warps.div_ceil(8))) })?;
        }
        if split {
            let chain = gpu.function(&KERNEL, "bf16_gemm_chain", faults)?;
            let mut yv = y.view();
            let ss = stages as i32;
            let mut b = gpu.launch_builder(&chain);
            b.arg(&parts).arg(&mut yv).arg(&mm).arg(&nn).arg(&ss);
            // A warp an output (any block size gives the same bits).
            let block = launch.block.clamp(32, CHAIN_BLOCK) / 32 * 32;
            let config = LaunchConfig {
                grid_dim: (launch.grid((m * n).div_ceil(block as usize / 32)), 1, 1),
                block_dim: (block, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments match the kernel's signature; y holds `m * n` values.
            cuda::launched("bf16_gemm_chain", unsafe { b.launch(config) })?;
        }
    } else {
        let f = gpu.function(&KERNEL, "bf16_gemm", faults)?;
        let mut yv = y.view();
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&wd).arg(&mut yv).arg(&mm).arg(&nn).arg(&kk);
        let tiles = n.div_ceil(128) * m.div_ceil(64);
        // SAFETY: the arguments match the kernel's signature; x holds `m * k`, w `n * k` and out `m * n` values.
        cuda::launched("bf16_gemm", unsafe { b.launch(launch.config(tiles)) })?;
    }
    y.finish(gpu)
}
