//! CPU `gather_rows`: each output row a copy of the source row its index names; rows split over threads.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// `out[r] = x[idx[r]]` for f32 rows of `dim` values.
pub fn gather_rows(x: &[f32], dim: usize, idx: &[i32], out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    assert!(dim > 0, "gather_rows: dim is 0");
    assert_eq!(x.len() % dim, 0, "gather_rows: source is not whole rows of {dim}");
    assert_eq!(
        out.len(),
        idx.len() * dim,
        "gather_rows: output is not {} rows of {dim}",
        idx.len()
    );
    let src_rows = x.len() / dim;
    let (skip_last, off_by_one) = (faults.on("skip_last_row"), faults.on("id_off_by_one"));
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (i, y) in chunk.chunks_mut(dim).enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == idx.len() {
                continue;
            }
            let from = idx[r] as usize;
            assert!(
                idx[r] >= 0 && from < src_rows,
                "gather_rows: index {} outside the source's {src_rows} rows",
                idx[r]
            );
            let from = if off_by_one { (from + 1) % src_rows } else { from };
            y.copy_from_slice(&x[from * dim..(from + 1) * dim]);
        }
    });
}
