//! CUDA `router`: one block per row, scores in shared memory, k rounds of a block argmax (the CPU's order and ties).

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most experts the kernel's shared-memory score array holds.
pub const MAX_EXPERTS: usize = 1024;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "router",
    source: include_str!("router.cu"),
    entries: &["router"],
    controls: &["race_no_sync", "skip_bias", "drop_last_in_sum"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// Top-`k` experts of `sqrt(softplus(z)) + bias` per row and their weights, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn router_cuda<'a>(
    launch: &CudaLaunch,
    logits: impl Into<In<'a, f32>>,
    bias: impl Into<In<'a, f32>>,
    k: usize,
    routed_scaling_factor: f32,
    idx: impl Into<Out<'a, i32>>,
    weights: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let logits = logits.into();
    let bias = bias.into();
    let idx = idx.into();
    let weights = weights.into();
    let experts = bias.len();
    if experts > MAX_EXPERTS || k == 0 || k > super::MAX_TOPK.min(experts) {
        return Err(format!(
            "router on CUDA: {experts} experts (at most {MAX_EXPERTS}), k {k}"
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "router", faults)?;
    let rows = logits.len() / experts;
    let (ld, bd) = (gpu.stage(logits)?, gpu.stage(bias)?);
    let (mut id, mut wd) = (gpu.stage_out(idx)?, gpu.stage_out(weights)?);
    {
        let (mut iv, mut wv) = (id.view(), wd.view());
        let (r, e, kk) = (rows as i32, experts as i32, k as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&ld)
            .input(&bd)
            .arg(&mut iv)
            .arg(&mut wv)
            .arg(&r)
            .arg(&e)
            .arg(&kk)
            .arg(&routed_scaling_factor);
        // SAFETY: the arguments match the kernel's signature; idx and weights hold `rows * k` values.
        cuda::launched("router", unsafe { b.launch(launch.config(rows)) })?;
    }
    id.finish(gpu)?;
    wd.finish(gpu)
}
