//! CUDA `embedding`: one block per token row, the id broadcast through shared memory; an id outside the vocab gives NaN.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "embedding",
    source: include_str!("embedding.cu"),
    entries: &["embedding"],
    controls: &["race_no_sync", "id_off_by_one"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// Rows of the bf16 `table` (`dim` values each, little-endian bytes) for `ids`, widened to f32 on the GPU.
pub fn embedding_cuda<'a>(
    launch: &CudaLaunch,
    table: impl Into<In<'a, u8>>,
    dim: usize,
    ids: impl Into<In<'a, i32>>,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let table = table.into();
    let ids = ids.into();
    let out = out.into();
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "embedding", faults)?;
    let (vocab, rows) = (table.len() / (2 * dim), ids.len());
    let (td, idd) = (gpu.stage(table)?, gpu.stage(ids)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, d, v) = (rows as i32, dim as i32, vocab as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&td).input(&idd).arg(&mut yv).arg(&r).arg(&d).arg(&v);
        // SAFETY: the arguments match the kernel's signature; ids outside the vocab are never dereferenced.
        cuda::launched("embedding", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
