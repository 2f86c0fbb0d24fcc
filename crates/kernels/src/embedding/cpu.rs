//! CPU `embedding`: one bf16 table row per token, widened exactly to f32; rows split over threads.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// `out[r] = f32(table[ids[r]])` for a little-endian bf16 `table` of `dim` values per token (the checkpoint's bytes).
pub fn embedding(table: &[u8], dim: usize, ids: &[i32], out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    assert!(dim > 0, "embedding: dim is 0");
    let row_bytes = 2 * dim;
    assert_eq!(
        table.len() % row_bytes,
        0,
        "embedding: table is not whole rows of {dim} bf16 values"
    );
    assert_eq!(
        out.len(),
        ids.len() * dim,
        "embedding: output is not {} rows of {dim}",
        ids.len()
    );
    let vocab = table.len() / row_bytes;
    let tile = launch.tile_rows.min(ids.len().max(1));
    let (skip_last, off_by_one) = (faults.on("skip_last_row"), faults.on("id_off_by_one"));
    let swap = faults.on("byte_swap");
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (tile_idx, tile_out) in chunk.chunks_mut(tile * dim).enumerate() {
            for (i, y) in tile_out.chunks_mut(dim).enumerate() {
                let r = first_row + tile_idx * tile + i;
                if skip_last && r + 1 == ids.len() {
                    continue;
                }
                let id = ids[r] as usize;
                assert!(
                    ids[r] >= 0 && id < vocab,
                    "embedding: token id {id} outside the vocab of {vocab}"
                );
                let id = if off_by_one { (id + 1) % vocab } else { id };
                let src = &table[id * row_bytes..(id + 1) * row_bytes];
                for (o, b) in y.iter_mut().zip(src.chunks_exact(2)) {
                    let bits = if swap { [b[1], b[0]] } else { [b[0], b[1]] };
                    *o = f32::from_bits((u16::from_le_bytes(bits) as u32) << 16);
                }
            }
        }
    });
}
