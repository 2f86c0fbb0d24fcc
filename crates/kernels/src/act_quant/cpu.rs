//! CPU `act_quant`: rows split over threads, each block's FP8 round trip on the launch's SIMD path.

use crate::cpu::quant_simd::{Grid, round_trip_blocks};
use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// FP8 e4m3 round trip in place of the first `n` values of every `row_len` row, per `block` values (last may be short).
pub fn act_quant(x: &mut [f32], row_len: usize, n: usize, block: usize, launch: &CpuLaunch, faults: Faults) {
    assert!(
        row_len > 0 && n <= row_len && block > 0,
        "act_quant: n {n}, block {block}, row {row_len}"
    );
    assert_eq!(
        x.len() % row_len,
        0,
        "act_quant: {} values are not whole rows of {row_len}",
        x.len()
    );
    let rows = x.len() / row_len;
    let tile = launch.tile_rows.min(rows.max(1));
    let skip_last_block = faults.on("skip_last_block");
    let block = if faults.on("block_plus_one") { block + 1 } else { block };
    let block = if faults.on("block_by_tile") && launch.tile_rows == 1 {
        2 * block
    } else {
        block
    };
    par_chunks_mut(x, row_len, launch.split_threads(x.len()), |_, chunk| {
        for tile_rows in chunk.chunks_mut(tile * row_len) {
            for row in tile_rows.chunks_mut(row_len) {
                let end = if skip_last_block {
                    n.saturating_sub(1) / block * block
                } else {
                    n
                };
                round_trip_blocks(&mut row[..end], block, Grid::E4m3, launch.simd);
            }
        }
    });
}
