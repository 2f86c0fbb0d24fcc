//! CUDA `gather_rows`: one block per output row, the source row's index broadcast through shared memory.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "gather_rows",
    source: include_str!("gather_rows.cu"),
    entries: &["gather_rows"],
    controls: &["race_no_sync", "id_off_by_one"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// Rows of `x` (`dim` values each) named by `idx`, on the GPU.
pub fn gather_rows_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    dim: usize,
    idx: impl Into<In<'a, i32>>,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let (x, idx, out) = (x.into(), idx.into(), out.into());
    if dim == 0 || x.len() % dim != 0 || out.len() != idx.len() * dim {
        return Err(format!(
            "gather_rows on CUDA: {} source values, {} indices and {} outputs are not rows of {dim}",
            x.len(),
            idx.len(),
            out.len()
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "gather_rows", faults)?;
    let (src_rows, rows) = (x.len() / dim, idx.len());
    let (xd, idd) = (gpu.stage(x)?, gpu.stage(idx)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, d, s) = (rows as i32, dim as i32, src_rows as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).input(&idd).arg(&mut yv).arg(&r).arg(&d).arg(&s);
        // SAFETY: the arguments match the kernel's signature; indices outside the source are never dereferenced.
        cuda::launched("gather_rows", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
