//! CUDA `nvfp4_round_trip`: one block per row, the e4m3 block scales in shared memory, every rounding decided in f64 as on the CPU.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The longest row the kernel's shared scales cover.
pub const MAX_ROW: usize = 8192;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "nvfp4_round_trip",
    source: include_str!("nvfp4_round_trip.cu"),
    entries: &["nvfp4_round_trip"],
    controls: &["race_no_sync", "block_32"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// NVFP4-style round trip of every `row_len` row per 16 values, into `out` on the GPU.
pub fn nvfp4_round_trip_cuda(
    launch: &CudaLaunch,
    x: &[f32],
    row_len: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if row_len == 0 || row_len > MAX_ROW {
        return Err(format!("nvfp4_round_trip on CUDA: rows of 1..={MAX_ROW} values"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "nvfp4_round_trip", faults)?;
    let rows = x.len() / row_len;
    let xd = gpu.upload(x)?;
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, l) = (rows as i32, row_len as i32);
        let mut b = gpu.launch_builder(&f);
        b.arg(&xd).arg(&mut yv).arg(&r).arg(&l);
        // SAFETY: the arguments match the kernel's signature; both buffers hold `rows * row_len` values.
        cuda::launched("nvfp4_round_trip", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
