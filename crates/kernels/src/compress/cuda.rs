//! CUDA `compress`: one block per entry row, one thread per channel, slots in fixed order (the CPU's arithmetic).

use super::CompressShape;
use crate::cuda::{self, CudaKernel, CudaLaunch, In, Out};
use crate::faults::Faults;

/// The most token slots per entry the kernel's shared-memory list holds (HCA: 128, CSA: 8).
pub const MAX_SLOTS: usize = 256;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "compress",
    source: include_str!("compress.cu"),
    entries: &["compress"],
    controls: &["race_no_sync", "unmasked_slot", "ape_same_half", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(512, 65_535),
    ],
};

/// Gated pooling of each row's token slots into one compressed entry, on the GPU (shapes checked by the CPU `compress`'s rules).
#[allow(clippy::too_many_arguments)]
pub fn compress_cuda<'a>(
    launch: &CudaLaunch,
    kv: impl Into<In<'a, f32>>,
    gate: impl Into<In<'a, f32>>,
    ape: impl Into<In<'a, f32>>,
    token_idx: impl Into<In<'a, i32>>,
    shape: CompressShape,
    out: impl Into<Out<'a, f32>>,
    faults: Faults,
) -> Result<(), String> {
    let kv = kv.into();
    let gate = gate.into();
    let ape = ape.into();
    let token_idx = token_idx.into();
    let out = out.into();
    let (hd, width, slots) = (shape.head_dim, shape.width(), shape.slots());
    if slots > MAX_SLOTS {
        return Err(format!(
            "compress on CUDA: {slots} token slots per entry, at most {MAX_SLOTS}: use a smaller ratio"
        ));
    }
    let rows = out.len() / hd.max(1);
    if kv.len() != gate.len()
        || !kv.len().is_multiple_of(width)
        || ape.len() != shape.ratio * width
        || token_idx.len() != rows * slots
    {
        return Err(format!(
            "compress on CUDA: kv/gate must be [tokens, {width}], ape [{}, {width}], token_idx [{rows}, {slots}]",
            shape.ratio
        ));
    }
    let num_tokens = kv.len() / width;
    if token_idx
        .host()
        .is_some_and(|t| t.iter().any(|&t| t >= num_tokens as i32))
    {
        return Err(format!(
            "compress on CUDA: a token index is past the {num_tokens} table rows"
        ));
    }
    if token_idx
        .host()
        .is_some_and(|t| t.chunks(slots).any(|row| row.iter().all(|&t| t < 0)))
    {
        return Err("compress on CUDA: a row has no token: give every entry at least one slot".into());
    }
    let gpu = cuda::gpu()?;
    let f = gpu.function(&KERNEL, "compress", faults)?;
    let (kd, gd, ad, td) = (gpu.stage(kv)?, gpu.stage(gate)?, gpu.stage(ape)?, gpu.stage(token_idx)?);
    let mut y = gpu.stage_out(out)?;
    {
        let mut yv = y.view();
        let (r, n, ratio) = (rows as i32, num_tokens as i32, shape.ratio as i32);
        let (h, o) = (hd as i32, shape.overlap as i32);
        let mut b = gpu.launch_builder(&f);
        b.input(&kd).input(&gd).input(&ad).input(&td).arg(&mut yv);
        b.arg(&r).arg(&n).arg(&ratio).arg(&h).arg(&o);
        // SAFETY: the arguments match the kernel's signature; the tables and token_idx hold what the shape indexes, checked above.
        cuda::launched("compress", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu)
}
