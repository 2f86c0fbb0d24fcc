//! CPU `moe_join`: rows split over threads; plain f32 adds in slot order then the shared expert, identical on every path.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// `out[r] = ((routed[r, 0] + routed[r, 1]) + ... + routed[r, k-1]) + shared[r]`: routed rows [k, dim], shared rows [dim].
pub fn moe_join(
    routed: &[f32],
    shared: &[f32],
    k: usize,
    dim: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(
        dim > 0 && shared.len().is_multiple_of(dim),
        "moe_join: shared is not whole rows of {dim}"
    );
    let rows = shared.len() / dim;
    assert_eq!(
        (routed.len(), out.len()),
        (rows * k * dim, rows * dim),
        "moe_join: routed must be [rows, {k}, {dim}], out [rows, {dim}]"
    );
    let skip_last = faults.on("skip_last_row");
    let drop_last_slot = faults.on("drop_last_slot");
    let shared_first = faults.on("order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (i, y) in chunk.chunks_mut(dim).enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == rows {
                continue;
            }
            let slots = if drop_last_slot { k.saturating_sub(1) } else { k };
            let slot = |j: usize| &routed[(r * k + j) * dim..(r * k + j + 1) * dim];
            let shared_row = &shared[r * dim..(r + 1) * dim];
            let mut terms = (0..slots).map(slot);
            if shared_first {
                y.copy_from_slice(shared_row);
            } else if let Some(first) = terms.next() {
                y.copy_from_slice(first);
            } else {
                y.fill(0.0);
            }
            for term in terms {
                add_into(y, term);
            }
            if !shared_first {
                add_into(y, shared_row);
            }
        }
    });
}

/// `y += v` elementwise (one rounding per element; vectorises on any x86-64 path with the same bits).
#[inline]
fn add_into(y: &mut [f32], v: &[f32]) {
    for (o, &a) in y.iter_mut().zip(v) {
        *o += a;
    }
}
