//! CUDA `head_rms_norm`: one block per head, the sum of squares in 256 fixed lanes.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "head_rms_norm",
    source: include_str!("head_rms_norm.cu"),
    entries: &["head_rms_norm"],
    controls: &["race_no_sync", "drop_last_element", "skip_last_head"],
    records: &[
        CudaLaunch::new(128, 65_535),
        CudaLaunch::new(128, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(512, 65_535),
    ],
};

/// `out = q` with each head of `head_dim` values scaled by `1/sqrt(mean(q_h^2) + eps)`, on the GPU.
pub fn head_rms_norm_cuda<'a>(
    launch: &CudaLaunch,
    q: impl Into<In<'a, f32>>,
    head_dim: usize,
    eps: f32,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let q = q.into();
    let out = out.into();
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "head_rms_norm", faults)?;
    let num_heads = q.len() / head_dim;
    let qd = gpu.stage(q)?;
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (n, d) = (num_heads as i32, head_dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&qd).arg(&mut yv).arg(&n).arg(&d).arg(&eps);
        // SAFETY: the arguments match the kernel's signature; both buffers hold `num_heads * head_dim` values.
        cuda::launched("head_rms_norm", unsafe { b.launch(launch.config(num_heads)) })?;
    }
    y.finish(gpu)
}
