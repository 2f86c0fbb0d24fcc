//! CPU `head_rms_norm`: heads split over threads, each head's sum of squares in the fixed 16-lane order.

use crate::cpu::{CpuLaunch, dot, par_chunks_mut};
use crate::faults::Faults;

/// `q_h *= 1 / sqrt(mean(q_h^2) + eps)` for every `head_dim` head of `q`, in place (no weight).
pub fn head_rms_norm(q: &mut [f32], head_dim: usize, eps: f32, launch: &CpuLaunch, faults: Faults) {
    assert!(head_dim > 0, "head_rms_norm: head_dim is 0");
    assert_eq!(
        q.len() % head_dim,
        0,
        "head_rms_norm: {} values are not whole heads of {head_dim}",
        q.len()
    );
    let num_heads = q.len() / head_dim;
    let tile = launch.tile_rows.min(num_heads.max(1));
    let skip_last = faults.on("skip_last_head");
    let used = if faults.on("drop_last_element") {
        head_dim - 1
    } else {
        head_dim
    };
    let serial_sum = faults.on("order_by_threads") && launch.threads > 1;
    par_chunks_mut(q, head_dim, launch.split_threads(q.len()), |first_head, chunk| {
        for (tile_idx, tile_heads) in chunk.chunks_mut(tile * head_dim).enumerate() {
            for (i, head) in tile_heads.chunks_mut(head_dim).enumerate() {
                if skip_last && first_head + tile_idx * tile + i + 1 == num_heads {
                    continue;
                }
                let h = &head[..used];
                let sum = if serial_sum {
                    h.iter().map(|v| v * v).sum()
                } else {
                    dot(h, h, launch.simd)
                };
                let scale = 1.0 / (sum / head_dim as f32 + eps).sqrt();
                for v in head.iter_mut() {
                    *v *= scale;
                }
            }
        }
    });
}
