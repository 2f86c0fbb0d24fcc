//! CUDA `index_scores`: one block per (query row, key column), one half-warp per head's dot with the CPU's 16 dot lanes (the CPU's bits).

use super::IndexShape;
use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most heads whose dots the kernel's shared memory holds (V4-Flash: 64).
pub const MAX_HEADS: usize = 512;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "index_scores",
    source: include_str!("index_scores.cu"),
    entries: &["index_scores"],
    controls: &["race_no_sync", "no_relu", "visible_off_by_one", "skip_last_row"],
    records: &[
        CudaLaunch::new(1024, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(256, 65_535),
    ],
};

/// `out[r, j] = sum_h w[r, h] * relu(q[r, h] . keys[start_r + j])` for `j < visible_r`, else -inf, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn index_scores_cuda<'a>(
    launch: &CudaLaunch,
    q: impl Into<In<'a, f32>>,
    w: impl Into<In<'a, f32>>,
    key_range: impl Into<In<'a, i32>>,
    keys: impl Into<In<'a, f32>>,
    shape: IndexShape,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let q = q.into();
    let w = w.into();
    let key_range = key_range.into();
    let keys = keys.into();
    let out = out.into();
    let (heads, hd) = (shape.num_heads, shape.head_dim);
    let rows = key_range.len() / 2;
    if rows == 0 {
        return Ok(());
    }
    if heads > MAX_HEADS {
        return Err(format!("index_scores on CUDA: {heads} heads, at most {MAX_HEADS}"));
    }
    let cols = out.len() / rows;
    let num_keys = keys.len() / hd.max(1);
    let bad_range = key_range.host().is_some_and(|k| {
        k.chunks(2)
            .any(|r| r[0] < 0 || r[1] < 0 || r[1] as usize > cols || (r[0] + r[1]) as usize > num_keys)
    });
    if q.len() != rows * heads * hd || w.len() != rows * heads || out.len() != rows * cols || bad_range {
        return Err(format!(
            "index_scores on CUDA: q must be [{rows}, {heads}, {hd}], w [{rows}, {heads}], each key range within the {num_keys} keys and {cols} columns"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "index_scores", faults)?;
    let (qd, wd, rd, kd) = (gpu.stage(q)?, gpu.stage(w)?, gpu.stage(key_range)?, gpu.stage(keys)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, h, d, c) = (rows as i32, heads as i32, hd as i32, cols as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&qd)
            .input(&wd)
            .input(&rd)
            .input(&kd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&h)
            .arg(&d)
            .arg(&c)
            .arg(&shape.weight_scale);
        // SAFETY: the arguments match the kernel's signature; every key range lies inside the table, checked above.
        cuda::launched("index_scores", unsafe { b.launch(launch.config(rows * cols)) })?;
    }
    y.finish(gpu)
}
