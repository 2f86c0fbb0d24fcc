//! CUDA `hash_router`: one thread per (row, slot), experts from the token's table row, weights summed in slot order.

use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hash_router",
    source: include_str!("hash_router.cu"),
    entries: &["hash_router"],
    controls: &["race_no_sync", "off_by_one_token", "drop_last_in_sum"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
    ],
};

/// The `k` experts `tid2eid[token]` per row with weights `sqrt(softplus(z[e]))` normalised and scaled, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hash_router_cuda<'a>(
    launch: &CudaLaunch,
    logits: impl Into<In<'a, f32>>,
    token_ids: impl Into<In<'a, i32>>,
    tid2eid: impl Into<In<'a, i32>>,
    num_experts: usize,
    k: usize,
    routed_scaling_factor: f32,
    idx: impl Into<Out<'a, i32>>,
    weights: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let logits = logits.into();
    let token_ids = token_ids.into();
    let tid2eid = tid2eid.into();
    let idx = idx.into();
    let weights = weights.into();
    if k == 0 || k > crate::router::MAX_TOPK || k > launch.block as usize {
        return Err(format!(
            "hash_router on CUDA: k {k} outside 1..={}",
            crate::router::MAX_TOPK
        ));
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "hash_router", faults)?;
    let rows = token_ids.len();
    let vocab = tid2eid.len() / k;
    let (ld, td, ed) = (gpu.stage(logits)?, gpu.stage(token_ids)?, gpu.stage(tid2eid)?);
    let (mut id, mut wd) = (gpu.stage_out(idx)?, gpu.stage_out(weights)?);
    {
        let (mut iv, mut wv) = (id.view(), wd.view());
        let (r, e, kk, v) = (rows as i32, num_experts as i32, k as i32, vocab as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&ld).input(&td).input(&ed).arg(&mut iv).arg(&mut wv);
        b.arg(&r).arg(&e).arg(&kk).arg(&v).arg(&routed_scaling_factor);
        let groups = rows.div_ceil(launch.block as usize / k);
        // SAFETY: the arguments match the kernel's signature; ids outside the table or experts are never dereferenced.
        cuda::launched("hash_router", unsafe { b.launch(launch.config(groups)) })?;
    }
    id.finish(gpu)?;
    wd.finish(gpu)
}
