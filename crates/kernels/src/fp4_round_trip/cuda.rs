//! CUDA `fp4_round_trip`: one block per row, the row staged in shared memory, one warp per quant block, the FP4 round trip.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The longest row the kernel's shared-memory amax array covers.
pub const MAX_ROW: usize = 8192;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "fp4_round_trip",
    source: include_str!("fp4_round_trip.cu"),
    entries: &["fp4_round_trip"],
    controls: &["race_no_sync", "drop_last_element", "block_plus_one"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// FP4 e2m1 round trip of every `row_len` row per 32 values, into `out` on the GPU.
pub fn fp4_round_trip_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    row_len: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let out = out.into();
    if row_len > MAX_ROW {
        return Err(format!("fp4_round_trip on CUDA: rows of at most {MAX_ROW} values"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "fp4_round_trip", faults)?;
    let rows = x.len() / row_len;
    let xd = gpu.stage(x)?;
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, l) = (rows as i32, row_len as i32);
        let mut lb = gpu.launch_builder(&f);
        lb.input(&xd).arg(&mut yv).arg(&r).arg(&l);
        // SAFETY: the arguments match the kernel's signature; both buffers hold `rows * row_len` values.
        cuda::launched("fp4_round_trip", unsafe { lb.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
