//! CUDA `index_topk`: one block per row, a radix select of the k-th largest score, then the kept indices in index order (exact).

use super::cpu::Place;
use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "index_topk",
    source: include_str!("index_topk.cu"),
    entries: &["index_topk"],
    controls: &["race_no_sync", "tie_higher_index", "unpadded_short_rows"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// Per row the indices of the `top_k` largest of its first `num_visible[r]` scores (ties: lower index), ascending, -1 padded, on the GPU.
pub fn index_topk_cuda<'a>(
    launch: &CudaLaunch,
    scores: impl Into<In<'a, f32>>,
    num_visible: impl Into<In<'a, i32>>,
    top_k: usize,
    out: impl Into<Out<'a, i32>>,
    faults: Faults,
) -> Result<(), String> {
    index_topk_placed_cuda(launch, scores, num_visible, top_k, Place::plain(top_k), out, faults)
}

/// `index_topk_cuda` writing each row's picks where `place` says, leaving the row's other values as they are.
pub fn index_topk_placed_cuda<'a>(
    launch: &CudaLaunch,
    scores: impl Into<In<'a, f32>>,
    num_visible: impl Into<In<'a, i32>>,
    top_k: usize,
    place: Place<'a>,
    out: impl Into<Out<'a, i32>>,
    faults: Faults,
) -> Result<(), String> {
    let scores = scores.into();
    let num_visible = num_visible.into();
    let out = out.into();
    let rows = num_visible.len();
    if rows == 0 || top_k == 0 {
        return Ok(());
    }
    let cols = scores.len() / rows;
    if scores.len() != rows * cols || cols >= i32::MAX as usize {
        return Err(format!(
            "index_topk on CUDA: scores must be whole rows of fewer than 2^31 columns, not {} values for {rows} rows",
            scores.len()
        ));
    }
    place
        .check(rows, top_k, out.len())
        .map_err(|e| format!("{e} (on CUDA)"))?;
    if num_visible
        .host()
        .is_some_and(|n| n.iter().any(|&v| v < 0 || v as usize > cols))
    {
        return Err(format!("index_topk on CUDA: a visible count is outside 0..={cols}"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "index_topk", faults)?;
    let (sd, vd) = (gpu.stage(scores)?, gpu.stage(num_visible)?);
    let od = place.offsets.map(|o| gpu.stage(In::Host(o))).transpose()?;
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, c, k) = (rows as i32, cols as i32, top_k as i32);
        let (stride, col, null) = (place.stride as i32, place.col as i32, 0u64);
        let mut b = gpu.launch_builder(&f);
        b.input(&sd)
            .input(&vd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&c)
            .arg(&k)
            .arg(&stride)
            .arg(&col);
        match &od {
            Some(o) => b.input(o),
            None => b.arg(&null),
        };
        // SAFETY: the arguments match the kernel's signature; scores hold `rows * cols` values, out `rows * stride` and offsets one a row (or null).
        cuda::launched("index_topk", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
