//! CPU `fp4_round_trip`: rows split over threads, each 32-value block's FP4 round trip on the launch's SIMD path.

use crate::cpu::quant_simd::{Grid, round_trip_blocks};
use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// Values per FP4 scale block.
pub const FP4_BLOCK: usize = 32;

/// FP4 e2m1 round trip in place of every `row_len` row, per 32 values (the last block may be short).
pub fn fp4_round_trip(x: &mut [f32], row_len: usize, launch: &CpuLaunch, faults: Faults) {
    assert!(row_len > 0, "fp4_round_trip: row_len is 0");
    assert_eq!(
        x.len() % row_len,
        0,
        "fp4_round_trip: {} values are not whole rows of {row_len}",
        x.len()
    );
    let rows = x.len() / row_len;
    let tile = launch.tile_rows.min(rows.max(1));
    let used = if faults.on("drop_last_element") {
        row_len - 1
    } else {
        row_len
    };
    let block = if faults.on("block_plus_one") {
        FP4_BLOCK + 1
    } else {
        FP4_BLOCK
    };
    let block = if faults.on("block_by_tile") && launch.tile_rows == 1 {
        block / 2
    } else {
        block
    };
    par_chunks_mut(x, row_len, launch.split_threads(x.len()), |_, chunk| {
        for tile_rows in chunk.chunks_mut(tile * row_len) {
            for row in tile_rows.chunks_mut(row_len) {
                round_trip_blocks(&mut row[..used], block, Grid::E2m1, launch.simd);
            }
        }
    });
}
