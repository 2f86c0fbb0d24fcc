//! CUDA `fp8_gemm`: activations act_quant'ed per row, then 128- or 64-row by 128-column tensor-core tiles with K in fixed 128-blocks.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out, Quantised};
use crate::faults::Faults;

/// The longest activation row the GEMMs take.
pub const MAX_K: usize = 8192;

/// The most rows that take the `_rows` entry (16-column tiles, K chunks spread over warps).
pub const DECODE_ROWS: usize = 16;

/// Column blocks of a `_rows` launch over `tiles` 16-column tiles, `per` such launches side by side (slots), `per_sm` blocks resident on an SM: that many in all (every SM full), each taking tiles in turn, shares differing by at most one, so its copies run on from one tile into the next.
pub fn rows_blocks(sms: u32, tiles: usize, per: usize, per_sm: usize) -> usize {
    let want = (per_sm * sms as usize / per.max(1)).max(1);
    tiles.min(want).max(1)
}

/// The most rows that take the `_rows8` entry (three blocks an SM, no work for rows 8 to 15).
pub const SMALL_ROWS: usize = 8;

/// The shortest K at which up to `SMALL_ROWS` rows take the `_rows_long` entry (registers a round ahead, one block a tile).
pub const LONG_K: usize = 4096;

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
        include_str!("../cuda/mma_rows.cuh"),
        include_str!("../cuda/wg_rs.cuh"),
        include_str!("fp8_gemm.cu")
    ),
    entries: &[
        "fp8_gemm_quant",
        "fp8_gemm",
        "fp8_gemm_rows",
        "fp8_gemm_rows8",
        "fp8_gemm_rows_long",
    ],
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
    fp8_gemms_cuda(launch, x, vec![(w.into(), w_scale.into(), n, out.into())], k, faults)
}

/// One weight of `fp8_gemms_cuda`: codes `[n, k]`, their block scales, `n` and the output `[rows, n]`.
pub type Fp8Weight<'a> = (In<'a, u8>, In<'a, u8>, usize, Out<'a, f32>);

/// `fp8_gemm_cuda` of one activation matrix `x` against each weight in turn, act_quant'ing `x` once.
pub fn fp8_gemms_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    weights: Vec<Fp8Weight<'a>>,
    k: usize,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    if k > MAX_K {
        return Err(format!("fp8_gemm on CUDA: K {k} above {MAX_K}"));
    }
    let gpu = cuda::gpu()?;
    let quant = gpu.function(&KERNEL, "fp8_gemm_quant", faults)?;
    let m = x.len() / k;
    let xd = gpu.stage(x)?;
    let (mut q, mut qs) = gpu.quant_scratch(m, k)?;
    let (mm, kk) = (m as i32, k as i32);
    {
        let mut b = gpu.launch_builder(&quant);
        b.input(&xd).arg(&mut q).arg(&mut qs).arg(&mm).arg(&kk);
        // SAFETY: the arguments match the kernel's signature; q holds `m` f16 rows of `k` rounded up to 8 and qs `m * ceil(k / 128)` values.
        cuda::launched("fp8_gemm_quant", unsafe {
            b.launch(launch.config(quant_blocks(launch, m, k)))
        })?;
    }
    let acts = Quantised {
        q: (&q).into(),
        scales: (&qs).into(),
        rows: m,
    };
    fp8_gemms_quantised_cuda(launch, acts, weights, k, faults)
}

/// `fp8_gemms_cuda` of rows act_quant'ed already.
pub fn fp8_gemms_quantised_cuda<'a>(
    launch: &CudaLaunch,
    acts: Quantised<'_>,
    weights: Vec<Fp8Weight<'a>>,
    k: usize,
    faults: Faults,
) -> Result<(), String> {
    let m = acts.rows(k).map_err(|e| format!("fp8_gemm on CUDA: {e}"))?;
    if k > MAX_K {
        return Err(format!("fp8_gemm on CUDA: K {k} above {MAX_K}"));
    }
    let gpu = cuda::gpu()?;
    let (q, qs) = (gpu.stage(acts.q)?, gpu.stage(acts.scales)?);
    let (mm, kk) = (m as i32, k as i32);
    for (w, w_scale, n, out) in weights {
        let (wd, sd) = (gpu.stage(w)?, gpu.stage(w_scale)?);
        let mut y = gpu.stage_out(out)?;
        {
            let mut yv = y.view();
            // Decode-sized batches take the narrow-tile entry (the same bits, more blocks).
            let (entry, tiles) = if m <= SMALL_ROWS && k >= LONG_K {
                ("fp8_gemm_rows_long", n.div_ceil(16))
            } else if m <= SMALL_ROWS {
                ("fp8_gemm_rows8", rows_blocks(gpu.sms, n.div_ceil(16), 1, 3))
            } else if m <= DECODE_ROWS {
                ("fp8_gemm_rows", rows_blocks(gpu.sms, n.div_ceil(16), 1, 2))
            } else {
                ("fp8_gemm", n.div_ceil(128) * m.div_ceil(64))
            };
            let f = gpu.function(&KERNEL, entry, faults)?;
            let nn = n as i32;
            let mut b = gpu.launch_builder(&f);
            b.input(&q)
                .input(&qs)
                .input(&wd)
                .input(&sd)
                .arg(&mut yv)
                .arg(&mm)
                .arg(&nn)
                .arg(&kk);
            // SAFETY: the arguments match the kernel's signature; w holds `n * k` codes and w_scale the 128x128 grid.
            cuda::launched(entry, unsafe { b.launch(gpu.config(launch, entry, tiles)) })?;
        }
        y.finish(gpu)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rows_blocks;

    #[test]
    fn rows_blocks_share_tiles_evenly_within_the_target() {
        for &(sms, per, per_sm) in &[
            (132u32, 1usize, 3usize),
            (132, 12, 3),
            (108, 6, 2),
            (1, 1, 1),
            (132, 1000, 3),
        ] {
            let want = (per_sm * sms as usize / per).max(1);
            for tiles in [1usize, 7, 32, 64, 128, 256, 2048, 65_535] {
                let blocks = rows_blocks(sms, tiles, per, per_sm);
                assert!(
                    (1..=tiles.min(want)).contains(&blocks),
                    "{tiles} tiles {want} wanted: {blocks}"
                );
                // Every SM slot is taken while there are tiles for it, and no block is left without a tile.
                assert_eq!(blocks, tiles.min(want), "{tiles} tiles, {want} wanted");
                let share = tiles.div_ceil(blocks);
                assert!(
                    share * blocks >= tiles && (share - 1) * blocks < tiles,
                    "{tiles} over {blocks}"
                );
            }
        }
    }
}
