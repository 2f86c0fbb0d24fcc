//! CUDA `moe_join`: one block per row and 32-column tile, the tile of every slot staged in shared memory, summed in slot order.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most expert slots one row may join (the kernel's shared-memory stage).
pub const MAX_SLOTS: usize = 16;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "moe_join",
    source: include_str!("moe_join.cu"),
    entries: &["moe_join"],
    controls: &["race_no_sync", "drop_last_slot"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// `out[r] = routed[r, 0] + ... + routed[r, k-1] + shared[r]` in that order, on the GPU.
pub fn moe_join_cuda<'a>(
    launch: &CudaLaunch,
    routed: impl Into<In<'a, f32>>,
    shared: impl Into<In<'a, f32>>,
    k: usize,
    dim: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let routed = routed.into();
    let shared = shared.into();
    let out = out.into();
    if k > MAX_SLOTS {
        return Err(format!("moe_join on CUDA joins at most {MAX_SLOTS} slots, not {k}"));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "moe_join", faults)?;
    let rows = shared.len() / dim;
    let (rd, sd) = (gpu.stage(routed)?, gpu.stage(shared)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, kk, d) = (rows as i32, k as i32, dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&rd).input(&sd).arg(&mut yv).arg(&r).arg(&kk).arg(&d);
        // SAFETY: the arguments match the kernel's signature; routed holds `rows * k * dim` values, shared and out `rows * dim`.
        cuda::launched("moe_join", unsafe { b.launch(launch.config(rows * dim.div_ceil(32))) })?;
    }
    y.finish(gpu)
}
