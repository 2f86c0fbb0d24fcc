//! CUDA `embedding`: one block per token row, the id broadcast through shared memory; an id outside the vocab gives NaN.

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
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
pub fn embedding_cuda(
    launch: &CudaLaunch,
    table: &[u8],
    dim: usize,
    ids: &[i32],
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "embedding", faults)?;
    let vocab = table.len() / (2 * dim);
    let (td, idd) = (gpu.upload(table)?, gpu.upload(ids)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, d, v) = (ids.len() as i32, dim as i32, vocab as i32);
        let mut b = gpu.stream.launch_builder(&f);
        b.arg(&td).arg(&idd).arg(&mut yv).arg(&r).arg(&d).arg(&v);
        // SAFETY: the arguments match the kernel's signature; ids outside the vocab are never dereferenced.
        cuda::launched("embedding", unsafe { b.launch(launch.config(ids.len())) })?;
    }
    y.finish(gpu, out)
}
