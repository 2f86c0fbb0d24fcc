//! CUDA `mxfp4_gemm`: activations act_quant'ed per row (fp8_gemm's quantiser), then 128- or 64-row by 128-column tensor-core tiles with K in fixed 128-blocks (32-block scales folded into the weights).

use cudarc::driver::CudaSlice;

use crate::cuda::{self, CudaKernel, CudaLaunch, Gpu, In, Out, Quantised, Staged};
use crate::faults::Faults;
use crate::fp8_gemm::{DECODE_ROWS, MAX_K, SMALL_ROWS, rows_blocks};

/// Warps in a block of `mxfp4_gemm_slots` (SLOTS_WARPS in mxfp4_slots.cu).
const SLOTS_WARPS: usize = 4;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "mxfp4_gemm",
    source: concat!(
        include_str!("../cuda/mma.cuh"),
        include_str!("../cuda/wgmma.cuh"),
        include_str!("../cuda/mma_pipe.cuh"),
        include_str!("../cuda/mma_rows.cuh"),
        include_str!("../cuda/wg_rs.cuh"),
        include_str!("../fp8_gemm/fp8_gemm.cu"),
        include_str!("mxfp4_gemm.cu"),
        include_str!("mxfp4_slots.cu")
    ),
    entries: &[
        "mxfp4_gemm_quant",
        "mxfp4_gemm",
        "mxfp4_gemm_rows",
        "mxfp4_gemm_rows8",
        "mxfp4_gemm_slots",
        "mxfp4_gemm_grouped",
    ],
    controls: &[
        "race_no_sync",
        "race_rows",
        "swap_nibbles",
        "lost_act_scale",
        "order_by_tile",
    ],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(256, 7),
    ],
};

/// The quantised rows of `x` (f16 grid values, row stride `k` rounded up to 8) and their per-128 scales.
pub struct QuantRows {
    q: CudaSlice<u16>,
    scales: CudaSlice<f32>,
    rows: usize,
}

impl QuantRows {
    /// The rows as a quantised GEMM's input.
    pub fn view(&self) -> Quantised<'_> {
        Quantised {
            q: (&self.q).into(),
            scales: (&self.scales).into(),
            rows: self.rows,
        }
    }
}

fn checked_k(k: usize) -> Result<(), String> {
    if k > MAX_K || !k.is_multiple_of(32) {
        return Err(format!(
            "mxfp4_gemm on CUDA: K {k} must be a multiple of 32 and at most {MAX_K}"
        ));
    }
    Ok(())
}

fn quantise(
    gpu: &Gpu,
    launch: &CudaLaunch,
    x: &Staged<'_, f32>,
    k: usize,
    faults: Faults,
) -> Result<QuantRows, String> {
    let quant = gpu.function(&KERNEL, "mxfp4_gemm_quant", faults)?;
    let rows = x.view().len() / k;
    let (mut q, mut scales) = gpu.quant_scratch(rows, k)?;
    let (mm, kk) = (rows as i32, k as i32);
    let mut b = gpu.launch_builder(&quant);
    b.input(x).arg(&mut q).arg(&mut scales).arg(&mm).arg(&kk);
    // SAFETY: the arguments match the kernel's signature; q holds `rows` f16 rows of `k` rounded up to 8 and scales `rows * ceil(k / 128)` values.
    cuda::launched("mxfp4_gemm_quant", unsafe {
        b.launch(launch.config(crate::fp8_gemm::quant_blocks(launch, rows, k)))
    })?;
    Ok(QuantRows { q, scales, rows })
}

/// `out = act_quant(x) . W^T` with e2m1 `w` `[n, k/2]` (low nibble first) and e8m0 `w_scale` `[n, k/32]`, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn mxfp4_gemm_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    w: impl Into<In<'a, u8>>,
    w_scale: impl Into<In<'a, u8>>,
    n: usize,
    k: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    checked_k(k)?;
    let gpu = cuda::gpu()?;
    let (xd, wd, sd) = (gpu.stage(x.into())?, gpu.stage(w.into())?, gpu.stage(w_scale.into())?);
    let mut y = gpu.stage_out(out.into())?;
    let qd = quantise(gpu, launch, &xd, k, faults)?;
    let m = qd.rows;
    {
        let mut yv = y.view();
        // Decode-sized batches take the narrow-tile entry (the same bits, more blocks).
        let (entry, tiles) = if m <= SMALL_ROWS {
            ("mxfp4_gemm_rows8", rows_blocks(gpu.sms, n.div_ceil(16), 1, 3))
        } else if m <= DECODE_ROWS {
            ("mxfp4_gemm_rows", rows_blocks(gpu.sms, n.div_ceil(16), 1, 2))
        } else {
            ("mxfp4_gemm", n.div_ceil(128) * m.div_ceil(64))
        };
        let f = gpu.function(&KERNEL, entry, faults)?;
        let (mm, nn, kk) = (m as i32, n as i32, k as i32);
        let mut b = gpu.launch_builder(&f);
        b.arg(&qd.q)
            .arg(&qd.scales)
            .input(&wd)
            .input(&sd)
            .arg(&mut yv)
            .arg(&mm)
            .arg(&nn)
            .arg(&kk);
        // SAFETY: the arguments match the kernel's signature; w holds `n * k / 2` bytes and w_scale `n * k / 32` codes.
        cuda::launched(entry, unsafe { b.launch(gpu.config(launch, entry, tiles)) })?;
    }
    y.finish(gpu)
}

/// Rows in a row group of `mxfp4_gemm_grouped` at most (its tiles' rows).
pub const GROUP_ROWS: usize = 64;

/// Row groups `[expert, first row, rows]` of `acts` (rows 1..=GROUP_ROWS each) against their experts' matrices in `table` (entry 2e the device address of expert e's `[n, k/2]` e2m1, 2e + 1 of its `[n, k/32]` e8m0), into the same rows of `out` `[rows, n]`, in one launch: mxfp4_gemm's bits on each group's rows; rows in no group are left as they are.
#[allow(clippy::too_many_arguments)]
pub fn mxfp4_gemm_grouped_cuda<'a>(
    launch: &CudaLaunch,
    acts: Quantised<'_>,
    table: &CudaSlice<u64>,
    groups: &[[i32; 3]],
    n: usize,
    k: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    checked_k(k)?;
    let rows = acts.rows(k).map_err(|e| format!("mxfp4_gemm_grouped on CUDA: {e}"))?;
    let experts = table.len() / 2;
    let bad = groups.iter().find(|&&[e, r0, len]| {
        e < 0
            || e as usize >= experts
            || r0 < 0
            || !(1..=GROUP_ROWS as i32).contains(&len)
            || (r0 + len) as usize > rows
    });
    if let Some(g) = bad {
        return Err(format!(
            "mxfp4_gemm_grouped on CUDA: group {g:?} is not an expert of {experts} over 1 to {GROUP_ROWS} of the {rows} rows"
        ));
    }
    let gpu = cuda::gpu()?;
    let out = out.into();
    if out.len() != rows * n {
        return Err(format!(
            "mxfp4_gemm_grouped on CUDA: {} outputs for {rows} rows of {n}",
            out.len()
        ));
    }
    if groups.is_empty() {
        return Ok(());
    }
    let flat: Vec<i32> = groups.iter().flatten().copied().collect();
    let mt = gpu.upload(&flat)?;
    let (q, qs) = (gpu.stage(acts.q)?, gpu.stage(acts.scales)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let entry = "mxfp4_gemm_grouped";
        let f = gpu.function(&KERNEL, entry, faults)?;
        let (g, nn, kk) = (groups.len() as i32, n as i32, k as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&q)
            .input(&qs)
            .arg(table)
            .arg(&mt)
            .arg(&g)
            .arg(&mut yv)
            .arg(&nn)
            .arg(&kk);
        // SAFETY: the arguments match the kernel's signature; every group names a table entry holding `[n, k/2]` and `[n, k/32]` bytes and rows inside q and y.
        cuda::launched(entry, unsafe {
            b.launch(gpu.config(launch, entry, groups.len() * n.div_ceil(128)))
        })?;
    }
    y.finish(gpu)
}

/// Rows `x` of `k` act_quant'ed on the GPU (the MXFP4 GEMMs' quantiser), for one or more quantised GEMMs.
pub fn mxfp4_quantise_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    k: usize,
    faults: Faults,
) -> Result<QuantRows, String> {
    checked_k(k)?;
    let gpu = cuda::gpu()?;
    let xd = gpu.stage(x.into())?;
    quantise(gpu, launch, &xd, k, faults)
}

/// Routed slots on the GPU, one launch for one or two matrices: `outs[z][s] = act_quant(x[s / per_row]) . W^T` with W expert `idx[s]` of `tables[z]` (entry 2e the device address of its `[n, k/2]` e2m1, 2e + 1 of its `[n, k/32]` e8m0); zeros for an id outside the table.
#[allow(clippy::too_many_arguments)]
pub fn mxfp4_gemm_slots_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    tables: &[&CudaSlice<u64>],
    idx: impl Into<In<'a, i32>>,
    per_row: usize,
    n: usize,
    k: usize,
    outs: Vec<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    checked_k(k)?;
    let gpu = cuda::gpu()?;
    let xd = gpu.stage(x.into())?;
    let qd = quantise(gpu, launch, &xd, k, faults)?;
    mxfp4_gemm_slots_quantised_cuda(launch, qd.view(), tables, idx, per_row, n, k, outs, faults)
}

/// `mxfp4_gemm_slots_cuda` of rows act_quant'ed already.
#[allow(clippy::too_many_arguments)]
pub fn mxfp4_gemm_slots_quantised_cuda<'a>(
    launch: &CudaLaunch,
    acts: Quantised<'_>,
    tables: &[&CudaSlice<u64>],
    idx: impl Into<In<'a, i32>>,
    per_row: usize,
    n: usize,
    k: usize,
    outs: Vec<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    checked_k(k)?;
    let rows = acts.rows(k).map_err(|e| format!("mxfp4_gemm_slots on CUDA: {e}"))?;
    let gpu = cuda::gpu()?;
    let id = gpu.stage(idx.into())?;
    let slots = id.view().len();
    if per_row == 0 || slots > 65_535 || rows < slots.div_ceil(per_row) {
        return Err(format!(
            "mxfp4_gemm_slots on CUDA: {slots} slots of {per_row} per row need that many rows of {k}"
        ));
    }
    if tables.is_empty()
        || tables.len() > 2
        || tables.len() != outs.len()
        || tables.iter().any(|t| t.len() != tables[0].len())
    {
        return Err("mxfp4_gemm_slots on CUDA: one or two tables of one length, an output each".into());
    }
    // Ids outside 0..experts give zero rows on the device.
    let experts = (tables[0].len() / 2).min(i32::MAX as usize) as i32;
    let mut ys = outs
        .into_iter()
        .map(|o| gpu.stage_out(o))
        .collect::<Result<Vec<_>, _>>()?;
    let (q, qs) = (gpu.stage(acts.q)?, gpu.stage(acts.scales)?);
    {
        let f = gpu.function(&KERNEL, "mxfp4_gemm_slots", faults)?;
        let (pr, nn, kk) = (per_row as i32, n as i32, k as i32);
        let z = tables.len();
        let (t0, t1) = (tables[0], tables[z - 1]);
        // A warp a 16-column tile, SLOTS_WARPS warps a block (the kernel's shared layout), tiles past the grid looped.
        let mut cfg = launch.config(n.div_ceil(16 * SLOTS_WARPS));
        cfg.block_dim.0 = 32 * SLOTS_WARPS as u32;
        cfg.grid_dim.1 = slots.max(1) as u32;
        cfg.grid_dim.2 = z as u32;
        let null = 0u64;
        let (first, rest) = ys.split_at_mut(1);
        let mut y0 = first[0].view();
        let mut y1 = rest.first_mut().map(|y| y.view());
        let mut b = gpu.launch_builder(&f);
        b.input(&q).input(&qs).arg(t0).arg(t1).input(&id).arg(&pr).arg(&mut y0);
        match y1.as_mut() {
            Some(y) => b.arg(y),
            // One matrix: the grid has no second z, so the second output is never touched.
            None => b.arg(&null),
        };
        b.arg(&nn).arg(&kk).arg(&experts);
        // SAFETY: the arguments match the kernel's signature; every idx inside 0..experts names a table entry whose addresses hold `[n, k/2]` and `[n, k/32]` bytes (the kernel reads no entry for others); each output holds `slots * n` values.
        cuda::launched("mxfp4_gemm_slots", unsafe { b.launch(cfg) })?;
    }
    ys.into_iter().try_for_each(|y| y.finish(gpu))
}
