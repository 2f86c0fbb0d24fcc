//! CUDA `hadamard`: one block per segment, butterflies in shared memory with a barrier between stages.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The largest segment the kernel's shared-memory stage holds.
pub const MAX_N: usize = 4096;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hadamard",
    source: include_str!("hadamard.cu"),
    entries: &["hadamard"],
    controls: &["race_no_sync", "lost_scale", "skip_last_segment"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// Walsh-Hadamard transform of every `n`-value segment of `x`, scaled by `n^-0.5`, into `out` on the GPU.
pub fn hadamard_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    n: usize,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let x = x.into();
    let out = out.into();
    if !n.is_power_of_two() || n > MAX_N {
        return Err(format!(
            "hadamard on CUDA: size {n} must be a power of two up to {MAX_N}"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hadamard", faults)?;
    let segments = x.len() / n;
    let scale = (1.0 / (n as f64).sqrt()) as f32;
    let xd = gpu.stage(x)?;
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (g, nn) = (segments as i32, n as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd).arg(&mut yv).arg(&g).arg(&nn).arg(&scale);
        // SAFETY: the arguments match the kernel's signature; both buffers hold `segments * n` values.
        cuda::launched("hadamard", unsafe { b.launch(launch.config(segments)) })?;
    }
    y.finish(gpu)
}
