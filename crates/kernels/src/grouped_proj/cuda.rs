//! CUDA `grouped_proj`: fp8_gemm's quantiser and tiles (the same source), one launch per output group.

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "grouped_proj",
    source: concat!(
        include_str!("../cuda/mma.cuh"),
        include_str!("../cuda/wgmma.cuh"),
        include_str!("../cuda/mma_pipe.cuh"),
        include_str!("../cuda/mma_rows.cuh"),
        include_str!("../cuda/wg_rs.cuh"),
        include_str!("../fp8_gemm/fp8_gemm.cu"),
        include_str!("grouped_proj.cu")
    ),
    entries: &["grouped_proj_quant", "grouped_proj"],
    controls: &["race_no_sync", "wrong_group", "lost_act_scale"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(256, 7),
    ],
};

/// `out[r, g * o_lora + c] = act_quant(o[r, g]) . wo_a[g * o_lora + c]` for every group `g`, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn grouped_proj_cuda(
    launch: &CudaLaunch,
    o: &[f32],
    wo_a: &[u8],
    wo_a_scale: &[u8],
    groups: usize,
    o_lora: usize,
    group_dim: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if group_dim > crate::fp8_gemm::MAX_K {
        return Err(format!(
            "grouped_proj on CUDA: group_dim {group_dim} above {}",
            crate::fp8_gemm::MAX_K
        ));
    }
    let gpu = cuda::gpu()?;
    let quant = gpu.function(&KERNEL, "grouped_proj_quant", faults)?;
    let gemm = gpu.function(&KERNEL, "grouped_proj", faults)?;
    let rows = o.len() / (groups * group_dim);
    let (od, wd, sd) = (gpu.upload(o)?, gpu.upload(wo_a)?, gpu.upload(wo_a_scale)?);
    let (mut q, mut qs) = gpu.quant_scratch(rows * groups, group_dim)?;
    let mut y = gpu.output(out)?;
    let (rg, k) = ((rows * groups) as i32, group_dim as i32);
    {
        let mut b = gpu.launch_builder(&quant);
        b.arg(&od).arg(&mut q).arg(&mut qs).arg(&rg).arg(&k);
        // SAFETY: the arguments match the kernel's signature; q holds `rows * groups` f16 rows of `group_dim` rounded up to 8 and qs their scales.
        cuda::launched("grouped_proj_quant", unsafe {
            b.launch(launch.config(crate::fp8_gemm::quant_blocks(launch, rows * groups, group_dim)))
        })?;
    }
    let (m, gs, ol) = (rows as i32, groups as i32, o_lora as i32);
    let tiles = o_lora.div_ceil(128) * rows.div_ceil(64);
    for g in 0..gs {
        let mut yv = y.view();
        let mut b = gpu.launch_builder(&gemm);
        b.arg(&q)
            .arg(&qs)
            .arg(&wd)
            .arg(&sd)
            .arg(&mut yv)
            .arg(&m)
            .arg(&gs)
            .arg(&ol)
            .arg(&k)
            .arg(&g);
        // SAFETY: the arguments match the kernel's signature; group g reads its activations and weights, writes its columns.
        cuda::launched("grouped_proj", unsafe {
            b.launch(gpu.config(launch, "grouped_proj", tiles))
        })?;
    }
    y.finish(gpu, out)
}
