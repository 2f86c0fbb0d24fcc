//! CUDA `engram_gate`: one block per token row, per stream f64 sums in 256 fixed lanes and the gate in shared memory, then one FMA per value.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most streams the kernel's shared gates hold.
pub const MAX_HC: usize = 16;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "engram_gate",
    source: include_str!("engram_gate.cu"),
    entries: &["engram_gate"],
    controls: &["race_no_sync", "unsigned_gate"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `out = x + gate * v` per stream (see the CPU `engram_gate`), on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn engram_gate_cuda(
    launch: &CudaLaunch,
    x: &[f32],
    keys: &[f32],
    v: &[f32],
    q_weight: &[f32],
    k_weight: &[f32],
    hc: usize,
    eps: f32,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if hc == 0 || hc > MAX_HC || !q_weight.len().is_multiple_of(hc) || q_weight.is_empty() {
        return Err(format!(
            "engram_gate on CUDA: hc {hc} outside 1..={MAX_HC} or weights not [hc, dim]"
        ));
    }
    let dim = q_weight.len() / hc;
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "engram_gate", faults)?;
    let rows = x.len() / (hc * dim);
    let (xd, kd, vd) = (gpu.upload(x)?, gpu.upload(keys)?, gpu.upload(v)?);
    let (qd, wd) = (gpu.upload(q_weight)?, gpu.upload(k_weight)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, h, d, e) = (rows as i32, hc as i32, dim as i32, eps as f64);
        let mut b = gpu.launch_builder(&f);
        b.arg(&xd)
            .arg(&kd)
            .arg(&vd)
            .arg(&qd)
            .arg(&wd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&h)
            .arg(&d)
            .arg(&e);
        // SAFETY: the arguments match the kernel's signature; x, keys and out hold `rows * hc * dim`, v `rows * dim` values.
        cuda::launched("engram_gate", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
