//! CUDA `rms_norm_quant`: `rms_norm`'s blocks, each act_quant'ing its own slice afterwards (f16 grid values and per-128 scales, as `fp8_gemm_quant` writes them).

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// Values of a row one block writes (the kernel's `SLICE`).
const SLICE: usize = 256;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "rms_norm_quant",
    source: concat!(
        include_str!("../rms_norm/rms_norm.cu"),
        include_str!("rms_norm_quant.cu")
    ),
    entries: &["rms_norm_quant"],
    controls: &["race_no_sync", "lost_act_scale", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `y = rms_norm(x) * weight`, `q` its e4m3 grid values as f16 (row stride `dim` rounded up to 8) and `q_scale` a scale per 128 values of a row, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_quant_cuda<'a>(
    launch: &CudaLaunch,
    x: impl Into<In<'a, f32>>,
    weight: impl Into<In<'a, f32>>,
    eps: f32,
    y: impl Into<Out<'a, f32>>,
    q: impl Into<Out<'a, u16>>,
    q_scale: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let (x, weight) = (x.into(), weight.into());
    let (y, q, q_scale) = (y.into(), q.into(), q_scale.into());
    let dim = weight.len();
    let rows = x.len() / dim.max(1);
    if dim == 0
        || x.len() != rows * dim
        || y.len() != x.len()
        || q.len() != rows * dim.next_multiple_of(8)
        || q_scale.len() != rows * dim.div_ceil(128)
    {
        return Err(format!(
            "rms_norm_quant on CUDA: {} inputs, {} outputs, {} codes and {} scales do not make rows of {dim}",
            x.len(),
            y.len(),
            q.len(),
            q_scale.len()
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "rms_norm_quant", faults)?;
    let (xd, wd) = (gpu.stage(x)?, gpu.stage(weight)?);
    let (mut yd, mut qd, mut sd) = (gpu.stage_out(y)?, gpu.stage_out(q)?, gpu.stage_out(q_scale)?);
    {
        let (mut yv, mut qv, mut sv) = (yd.view(), qd.view(), sd.view());
        let (r, d) = (rows as i32, dim as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&xd)
            .input(&wd)
            .arg(&mut yv)
            .arg(&mut qv)
            .arg(&mut sv)
            .arg(&r)
            .arg(&d)
            .arg(&eps);
        // SAFETY: the arguments match the kernel's signature; the lengths were checked above.
        cuda::launched("rms_norm_quant", unsafe {
            b.launch(launch.config(rows * dim.div_ceil(SLICE)))
        })?;
    }
    yd.finish(gpu)?;
    qd.finish(gpu)?;
    sd.finish(gpu)
}
