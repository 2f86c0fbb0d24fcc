//! CUDA `rope`: one block per (row, head), cos/sin from the exact f64 angle in shared memory, one FMA rotation per value.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most frequency pairs the kernel's shared-memory table holds.
pub const MAX_PAIRS: usize = 512;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "rope",
    source: include_str!("rope.cu"),
    entries: &["rope"],
    controls: &["race_no_sync", "position_off_by_one", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// Rotates the last `2 * inv_freq.len()` values of each `head_dim` head by `pos * inv_freq` (minus if `inverse`), into `out`.
#[allow(clippy::too_many_arguments)]
pub fn rope_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    positions: impl Into<In<'a, i32>>,
    head_dim: usize,
    inv_freq: impl Into<In<'a, f32>>,
    inverse: bool,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let positions = positions.into();
    let inv_freq = inv_freq.into();
    let out = out.into();
    let pairs = inv_freq.len();
    if pairs > MAX_PAIRS || 2 * pairs > head_dim {
        return Err(format!(
            "rope on CUDA: {pairs} pairs for head_dim {head_dim} (at most {MAX_PAIRS})"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "rope", faults)?;
    let rows = positions.len();
    let row_len = x.len() / rows.max(1);
    if head_dim == 0 || !row_len.is_multiple_of(head_dim) {
        return Err(format!(
            "rope on CUDA: rows of {row_len} are not whole heads of {head_dim}"
        ));
    }
    let (xd, pd, fd) = (gpu.stage(x)?, gpu.stage(positions)?, gpu.stage(inv_freq)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, l, h, p, inv) = (
            rows as i32,
            row_len as i32,
            head_dim as i32,
            pairs as i32,
            inverse as i32,
        );
        let mut b = gpu.launch_builder(&f);
        b.input(&xd)
            .input(&pd)
            .input(&fd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&l)
            .arg(&h)
            .arg(&p)
            .arg(&inv);
        // SAFETY: the arguments match the kernel's signature; x and out hold `rows * row_len` values, whole heads of `head_dim`.
        cuda::launched("rope", unsafe { b.launch(launch.config(rows * (row_len / head_dim))) })?;
    }
    y.finish(gpu)
}
