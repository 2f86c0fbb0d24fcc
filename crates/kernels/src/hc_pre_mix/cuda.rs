//! CUDA `hc_pre_mix`: `hc_pre`'s blocks, each first making its row's gates from the mix in shared memory.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;
use crate::hc_pre::cuda::MAX_HC;

/// Outputs of a row one block writes (the kernel's `SLICE`).
const SLICE: usize = 256;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_pre_mix",
    source: concat!(include_str!("../hc_pre/hc_pre.cu"), include_str!("hc_pre_mix.cu")),
    entries: &["hc_pre_mix"],
    controls: &["race_no_sync", "drop_last_stream", "lost_pre_scale"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// `out[r] = sum_s pre_s * x[r, s]` in stream order with `pre_s = sigmoid(mix[r, s] * scale[0] + base[s]) + eps`, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_pre_mix_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    mix: impl Into<In<'a, f32>>,
    scale: impl Into<In<'a, f32>>,
    base: impl Into<In<'a, f32>>,
    hc: usize,
    dim: usize,
    eps: f32,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let (x, mix, scale, base, out) = (x.into(), mix.into(), scale.into(), base.into(), out.into());
    if hc == 0 || hc > MAX_HC {
        return Err(format!("hc_pre_mix on CUDA: hc {hc} outside 1..={MAX_HC}"));
    }
    let rows = mix.len() / ((2 + hc) * hc);
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hc_pre_mix", faults)?;
    let (xd, md, sd, bd) = (gpu.stage(x)?, gpu.stage(mix)?, gpu.stage(scale)?, gpu.stage(base)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd)
            .input(&md)
            .input(&sd)
            .input(&bd)
            .arg(&mut yv)
            .arg(&r)
            .arg(&h)
            .arg(&d)
            .arg(&eps);
        // SAFETY: the arguments match the kernel's signature; x holds `rows * hc * dim`, mix `rows * (2 + hc) * hc`, base at least `hc`, out `rows * dim`.
        cuda::launched("hc_pre_mix", unsafe {
            b.launch(launch.config(rows * dim.div_ceil(SLICE)))
        })?;
    }
    y.finish(gpu)
}
