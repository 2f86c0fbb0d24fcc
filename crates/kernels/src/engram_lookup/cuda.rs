//! CUDA `engram_lookup`: one block per token row, the row's table ids through shared memory, every value widened exactly.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most hash heads per row the kernel's shared ids hold.
pub const MAX_HEADS: usize = 64;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "engram_lookup",
    source: include_str!("engram_lookup.cu"),
    entries: &["engram_lookup"],
    controls: &["race_no_sync", "scale_next_block"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// Table rows `ids` (`[rows, heads]`) of the e4m3 `table` times their e8m0 `scales` per 32 columns, on the GPU; an id outside the table gives NaN.
#[allow(clippy::too_many_arguments)]
pub fn engram_lookup_cuda(
    launch: &CudaLaunch,
    table: &[u8],
    scales: &[u8],
    dim: usize,
    heads: usize,
    ids: &[i32],
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if heads == 0 || heads > MAX_HEADS || dim == 0 || !dim.is_multiple_of(32) {
        return Err(format!(
            "engram_lookup on CUDA: 1..={MAX_HEADS} heads and dim a multiple of 32 (got {heads}, {dim})"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "engram_lookup", faults)?;
    let rows = ids.len() / heads;
    let (td, sd, idd) = (gpu.upload(table)?, gpu.upload(scales)?, gpu.upload(ids)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, h, d, t) = (rows as i32, heads as i32, dim as i32, (table.len() / dim) as i32);
        let mut b = gpu.launch_builder(&f);
        b.arg(&td)
            .arg(&sd)
            .arg(&idd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&h)
            .arg(&d)
            .arg(&t);
        // SAFETY: the arguments match the kernel's signature; ids outside the table are never dereferenced.
        cuda::launched("engram_lookup", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
