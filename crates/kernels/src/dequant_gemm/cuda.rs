//! CUDA `dequant_gemm`: exact FP8-block or MXFP4 weight decode into 64x64 tiles on CUDA cores, one launch per output group.

use super::WeightFormat;
use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "dequant_gemm",
    source: include_str!("dequant_gemm.cu"),
    entries: &["dequant_gemm", "dequant_gemm_rows"],
    controls: &["race_no_sync", "lost_scale", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(256, 7),
    ],
};

/// The most rows that take the `_rows` entry (a warp per output column of every group, in one launch).
pub const DECODE_ROWS: usize = 16;

/// `out[r, c] = x[r, c / (n / groups)] . W[c]` with decoded weights, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn dequant_gemm_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    w: impl Into<In<'a, u8>>,
    scales: impl Into<In<'a, u8>>,
    format: WeightFormat,
    n: usize,
    k: usize,
    groups: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let w = w.into();
    let scales = scales.into();
    let out = out.into();
    if groups == 0 || !n.is_multiple_of(groups) || (format == WeightFormat::Mxfp4 && !k.is_multiple_of(32)) {
        return Err(format!("dequant_gemm on CUDA: [{n}, {k}] in {groups} groups"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "dequant_gemm", faults)?;
    let rows = x.len() / (k * groups);
    if rows <= DECODE_ROWS {
        return rows_entry(launch, gpu, (x, w, scales, out), format, n, k, groups, faults);
    }
    let per_group = n / groups;
    let (xd, wd, sd) = (gpu.stage(x)?, gpu.stage(w)?, gpu.stage(scales)?);
    let mut y = gpu.stage_out(out)?;
    let (m, pg, kk, gs, ys) = (rows as i32, per_group as i32, k as i32, groups as i32, n as i32);
    let fp4 = (format == WeightFormat::Mxfp4) as i32;
    let tiles = per_group.div_ceil(64) * rows.div_ceil(64);
    for g in 0..gs {
        let mut yv = y.view();
        let mut b = gpu.launch_builder(&f);
        b.input(&xd)
            .input(&wd)
            .input(&sd)
            .arg(&mut yv)
            .arg(&m)
            .arg(&pg)
            .arg(&kk)
            .arg(&gs)
            .arg(&g)
            .arg(&ys)
            .arg(&fp4);
        // SAFETY: the arguments match the kernel's signature; group g reads its activations and weight rows, writes its columns.
        cuda::launched("dequant_gemm", unsafe { b.launch(launch.config(tiles)) })?;
    }
    y.finish(gpu)
}

type Args<'a> = (In<'a, f32>, In<'a, u8>, In<'a, u8>, Out<'a, f32>);

/// Decode-sized batches: every group in one launch of `dequant_gemm_rows` (the same bits as the tiles, more blocks).
#[allow(clippy::too_many_arguments)]
fn rows_entry(
    launch: &CudaLaunch,
    gpu: &cuda::Gpu,
    (x, w, scales, out): Args<'_>,
    format: WeightFormat,
    n: usize,
    k: usize,
    groups: usize,
    faults: Faults,
) -> Result<(), String> {
    let f = gpu.function(&KERNEL, "dequant_gemm_rows", faults)?;
    let rows = x.len() / (k * groups);
    let per_group = n / groups;
    let (xd, wd, sd) = (gpu.stage(x)?, gpu.stage(w)?, gpu.stage(scales)?);
    let mut y = gpu.stage_out(out)?;
    {
        let (m, pg, kk, gs, ys) = (rows as i32, per_group as i32, k as i32, groups as i32, n as i32);
        let fp4 = (format == WeightFormat::Mxfp4) as i32;
        let mut yv = y.view();
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&wd).input(&sd).arg(&mut yv);
        b.arg(&m).arg(&pg).arg(&kk).arg(&gs).arg(&ys).arg(&fp4);
        let blocks = n.div_ceil(launch.block as usize / 32);
        // SAFETY: the arguments match the kernel's signature; each warp reads its column's weight row and the rows' activations of its group.
        cuda::launched("dequant_gemm_rows", unsafe { b.launch(launch.config(blocks)) })?;
    }
    y.finish(gpu)
}
