//! CUDA `fp8_gemm`: activations act_quant'ed per row, then 128- or 64-row by 128-column tensor-core tiles with K in fixed 128-blocks.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out, PushIn};
use crate::faults::Faults;

/// The longest activation row the GEMMs take.
pub const MAX_K: usize = 8192;

/// The most rows that take the `_rows` entry (16-column tiles, K chunks spread over warps).
pub const DECODE_ROWS: usize = 16;

/// Blocks for the quantiser over `rows` rows of `k`: one warp per (row, 128-block).
pub fn quant_blocks(launch: &CudaLaunch, rows: usize, k: usize) -> usize {
    (rows * k.div_ceil(128)).div_ceil((launch.block as usize / 32).max(1))
}

pub static KERNEL: CudaKernel = CudaKernel {
    name: "fp8_gemm",
    source: concat!(
        include_str!("../cuda/mma.cuh"),
        include_str!("../cuda/wgmma.cuh"),
        include_str!("../cuda/mma_pipe.cuh"),
        include_str!("fp8_gemm.cu")
    ),
    entries: &["fp8_gemm_quant", "fp8_gemm", "fp8_gemm_rows"],
    controls: &[
        "race_no_sync",
        "race_rows",
        "lost_act_scale",
        "skip_last_column",
        "drop_tail_block",
    ],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(256, 7),
    ],
};

/// `out = act_quant(x) . W^T` with e4m3 `w` `[n, k]` and e8m0 `w_scale` per 128x128 block, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn fp8_gemm_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    w: impl Into<In<'a, u8>>,
    w_scale: impl Into<In<'a, u8>>,
    n: usize,
    k: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let w = w.into();
    let w_scale = w_scale.into();
    let out = out.into();
    if k > MAX_K {
        return Err(format!("fp8_gemm on CUDA: K {k} above {MAX_K}"));
    }
    let gpu = cuda::gpu()?;
    let quant = gpu.function(&KERNEL, "fp8_gemm_quant", faults)?;
    let gemm = gpu.function(&KERNEL, "fp8_gemm", faults)?;
    let rows = gpu.function(&KERNEL, "fp8_gemm_rows", faults)?;
    let m = x.len() / k;
    let (xd, wd, sd) = (gpu.stage(x)?, gpu.stage(w)?, gpu.stage(w_scale)?);
    let (mut q, mut qs) = gpu.quant_scratch(m, k)?;
    let mut y = gpu.stage_out(out)?;
    let (mm, nn, kk) = (m as i32, n as i32, k as i32);
    {
        let mut b = gpu.stream.launch_builder(&quant);
        b.input(&xd).arg(&mut q).arg(&mut qs).arg(&mm).arg(&kk);
        // SAFETY: the arguments match the kernel's signature; q holds `m` f16 rows of `k` rounded up to 8 and qs `m * ceil(k / 128)` values.
        cuda::launched("fp8_gemm_quant", unsafe {
            b.launch(launch.config(quant_blocks(launch, m, k)))
        })?;
    }
    {
        let mut yv = y.view();
        // Decode-sized batches take the narrow-tile entry (the same bits, more blocks).
        let (f, entry, tiles) = if m <= DECODE_ROWS {
            (&rows, "fp8_gemm_rows", n.div_ceil(16))
        } else {
            (&gemm, "fp8_gemm", n.div_ceil(128) * m.div_ceil(64))
        };
        let mut b = gpu.stream.launch_builder(f);
        b.arg(&q)
            .arg(&qs)
            .input(&wd)
            .input(&sd)
            .arg(&mut yv)
            .arg(&mm)
            .arg(&nn)
            .arg(&kk);
        // SAFETY: the arguments match the kernel's signature; w holds `n * k` codes and w_scale the 128x128 grid.
        cuda::launched(entry, unsafe { b.launch(launch.config(tiles)) })?;
    }
    y.finish(gpu)
}
