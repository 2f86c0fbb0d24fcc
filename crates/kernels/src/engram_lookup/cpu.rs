//! CPU `engram_lookup`: rows split over threads; per hash head one table row, each 32-column block its e4m3 codes times its e8m0 scale.

use tensorfold_formats::{e4m3, e8m0};

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// Columns per e8m0 scale of the Engram table.
pub const SCALE_BLOCK: usize = 32;

/// `out[r, h] = e4m3(table[ids[r, h]]) * e8m0(scales[ids[r, h]])` per 32 columns: `[rows, heads, dim]` from `[table_rows, dim]` codes.
pub fn engram_lookup(
    table: &[u8],
    scales: &[u8],
    dim: usize,
    ids: &[i32],
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(
        dim > 0 && dim.is_multiple_of(SCALE_BLOCK),
        "engram_lookup: dim {dim} is not a positive multiple of {SCALE_BLOCK}"
    );
    let blocks = dim / SCALE_BLOCK;
    assert!(
        table.len().is_multiple_of(dim),
        "engram_lookup: table is not whole rows of {dim} codes"
    );
    let table_rows = table.len() / dim;
    assert_eq!(
        scales.len(),
        table_rows * blocks,
        "engram_lookup: scales must be [{table_rows}, {blocks}]"
    );
    assert_eq!(out.len(), ids.len() * dim, "engram_lookup: output is not [ids, {dim}]");
    assert!(
        ids.iter().all(|&id| id >= 0 && (id as usize) < table_rows),
        "engram_lookup: a row id lies outside the table of {table_rows} rows"
    );
    let (next_scale, skip_last) = (faults.on("scale_next_block"), faults.on("skip_last_head"));
    let off_by_one = faults.on("id_off_by_one");
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first, chunk| {
        for (i, y) in chunk.chunks_mut(dim).enumerate() {
            let head_idx = first + i;
            if skip_last && head_idx + 1 == ids.len() {
                continue;
            }
            let id = ids[head_idx] as usize;
            let id = if off_by_one { (id + 1) % table_rows } else { id };
            let codes = &table[id * dim..(id + 1) * dim];
            for (b, (yb, cb)) in y.chunks_mut(SCALE_BLOCK).zip(codes.chunks(SCALE_BLOCK)).enumerate() {
                let sb = if next_scale { (b + 1) % blocks } else { b };
                let s = e8m0::TABLE[scales[id * blocks + sb] as usize];
                for (o, &c) in yb.iter_mut().zip(cb) {
                    *o = e4m3::TABLE[c as usize] * s;
                }
            }
        }
    });
}
