//! CUDA `sparse_attn`: one block per (row, head), or per (row, four heads) from `GROUP_ROWS` rows on, the CPU's score and softmax arithmetic, P.V in fixed 64-entry splits stepped four at a time.

use super::AttnShape;
use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// Rows from which a block takes four heads of a row, reading each listed entry once for them (fewer rows keep a block a head, for more blocks).
const GROUP_ROWS: usize = 16;

/// Heads a block of `sparse_attn_heads4` takes.
const HEADS4: usize = 4;

/// Longest list `sparse_attn` keeps in shared memory (its body's CAP); longer lists use the global scratch.
const LIST_CAP: usize = 2048;

/// `LIST_CAP` of `sparse_attn_heads4`.
const LIST_CAP4: usize = 1024;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "sparse_attn",
    source: include_str!("sparse_attn.cu"),
    entries: &["sparse_attn", "sparse_attn_heads4"],
    controls: &["race_no_sync", "no_sink", "padding_reads_entry_0", "split_by_grid"],
    records: &[
        CudaLaunch::new(512, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(256, 65_535),
    ],
};

/// `o[r, h] = sum_e bf16?(p[r, h, e]) * kv[idx[r, e]]` over each row's listed entries (`-1`: none), with the sink, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn sparse_attn_cuda<'a>(
    launch: &CudaLaunch,
    q: impl Into<In<'a, f32>>,
    idx: impl Into<In<'a, i32>>,
    kv: impl Into<In<'a, f32>>,
    sink: impl Into<In<'a, f32>>,
    shape: AttnShape,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let q = q.into();
    let idx = idx.into();
    let kv = kv.into();
    let sink = sink.into();
    let out = out.into();
    let (heads, hd) = (shape.num_heads, shape.head_dim);
    if heads == 0 || hd == 0 || sink.len() != heads || !q.len().is_multiple_of(heads * hd) || out.len() != q.len() {
        return Err(format!(
            "sparse_attn on CUDA: q and the output must be [rows, {heads}, {hd}] and sink [{heads}]"
        ));
    }
    let rows = q.len() / (heads * hd);
    if rows == 0 {
        return Ok(());
    }
    let num_idx = idx.len() / rows;
    let num_entries = kv.len() / hd;
    if idx.len() != rows * num_idx || kv.len() != num_entries * hd {
        return Err(format!(
            "sparse_attn on CUDA: idx must be whole rows and kv whole entries of {hd}"
        ));
    }
    if idx
        .host()
        .is_some_and(|i| i.iter().any(|&e| e < -1 || e >= num_entries as i32))
    {
        return Err(format!(
            "sparse_attn on CUDA: an entry index is outside -1..{num_entries}"
        ));
    }
    let gpu = cuda::gpu()?;
    let (entry, per_block, cap) = match rows >= GROUP_ROWS && heads > 1 {
        true => ("sparse_attn_heads4", HEADS4, LIST_CAP4),
        false => ("sparse_attn", 1, LIST_CAP),
    };
    let f = gpu.function(&KERNEL, entry, faults)?;
    let items = rows * heads.div_ceil(per_block);
    // Only lists past the entry's shared-memory cap touch the scratch.
    let scratch = match num_idx > cap {
        true => launch.grid(items) as usize * num_idx,
        false => 1,
    };
    // The kernel writes each block's list and its heads' probabilities before reading them.
    let (mut list, mut probs) = (gpu.scratch::<i32>(scratch)?, gpu.scratch::<f32>(scratch * per_block)?);
    let (qd, id, kd, sd) = (gpu.stage(q)?, gpu.stage(idx)?, gpu.stage(kv)?, gpu.stage(sink)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, h, d, n) = (rows as i32, heads as i32, hd as i32, num_idx as i32);
        let bf16 = shape.bf16_probs as i32;
        let mut b = gpu.launch_builder(&f);
        b.input(&qd)
            .input(&id)
            .input(&kd)
            .input(&sd)
            .arg(&mut yv)
            .arg(&mut list)
            .arg(&mut probs);
        b.arg(&r).arg(&h).arg(&d).arg(&n).arg(&shape.softmax_scale).arg(&bf16);
        // SAFETY: the arguments match the kernel's signature; every index is in range (checked above) and, for lists past the cap, the scratch holds num_idx values per block and head.
        cuda::launched(entry, unsafe { b.launch(launch.config(items)) })?;
    }
    y.finish(gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_caps_are_the_kernel_bodies_caps() {
        for (entry, heads, cap) in [("sparse_attn", 1, LIST_CAP), ("sparse_attn_heads4", HEADS4, LIST_CAP4)] {
            let body = format!("sparse_attn_body<{heads}, {cap}>");
            assert!(KERNEL.source.contains(&body), "{entry} must run {body}");
        }
    }
}
