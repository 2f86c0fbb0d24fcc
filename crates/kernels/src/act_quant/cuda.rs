//! CUDA `act_quant`: one block per row, the row staged in shared memory, one warp per quant block, the FP8 round trip as the CPU does it.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The longest row the kernel's shared-memory stage holds.
pub const MAX_ROW: usize = 8192;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "act_quant",
    source: include_str!("act_quant.cu"),
    entries: &["act_quant"],
    controls: &["race_no_sync", "skip_last_block", "block_plus_one"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// FP8 e4m3 round trip of the first `n` values of every `row_len` row, per `block` values, into `out` on the GPU.
pub fn act_quant_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    row_len: usize,
    n: usize,
    block: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let out = out.into();
    if row_len > MAX_ROW || n > row_len || block == 0 {
        return Err(format!(
            "act_quant on CUDA: rows of at most {MAX_ROW} values, n {n} <= row, block > 0"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "act_quant", faults)?;
    let rows = x.len() / row_len;
    let xd = gpu.stage(x)?;
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, l, nn, b) = (rows as i32, row_len as i32, n as i32, block as i32);
        let mut lb = gpu.launch_builder(&f);
        lb.input(&xd).arg(&mut yv).arg(&r).arg(&l).arg(&nn).arg(&b);
        // SAFETY: the arguments match the kernel's signature; both buffers hold `rows * row_len` values.
        cuda::launched("act_quant", unsafe { lb.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
