//! CPU `swiglu`: rows split over threads; portable, AVX2 and AVX-512 paths give identical bits (same FMA exp polynomial).

use crate::cpu::math::silu;
use crate::cpu::{CpuLaunch, SimdPath, par_chunks_mut};
use crate::faults::Faults;

/// `out = w * (silu(min(gate, limit)) * clamp(up, -limit, limit))` per row, with one route weight `w` per row.
pub fn swiglu(
    gate: &[f32],
    up: &[f32],
    route_weight: &[f32],
    limit: f32,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let rows = route_weight.len();
    assert!(
        gate.len() == up.len() && gate.len() == out.len(),
        "swiglu: gate, up and out lengths differ"
    );
    if rows == 0 {
        assert!(gate.is_empty(), "swiglu: values without route weights");
        return;
    }
    assert_eq!(
        gate.len() % rows,
        0,
        "swiglu: {} values are not {rows} rows",
        gate.len()
    );
    let inter = gate.len() / rows;
    let tile = launch.tile_rows.min(rows);
    let skip_last = faults.on("skip_last_row");
    let up_limit = if faults.on("no_up_clamp") { f32::INFINITY } else { limit };
    let tile_weight = faults.on("weight_of_tile_start");
    par_chunks_mut(out, inter, launch.split_threads(out.len()), |first_row, chunk| {
        for (tile_idx, tile_out) in chunk.chunks_mut(tile * inter).enumerate() {
            let tile_start = first_row + tile_idx * tile;
            for (i, h) in tile_out.chunks_mut(inter).enumerate() {
                let r = tile_start + i;
                if skip_last && r + 1 == rows {
                    continue;
                }
                let w = route_weight[if tile_weight { tile_start } else { r }];
                let (g, u) = (&gate[r * inter..(r + 1) * inter], &up[r * inter..(r + 1) * inter]);
                row(g, u, w, limit, up_limit, h, launch.simd);
            }
        }
    });
}

/// One row on `simd`; the vector paths cover whole vectors and this finishes the tail.
fn row(g: &[f32], u: &[f32], w: f32, limit: f32, up_limit: f32, h: &mut [f32], simd: SimdPath) {
    let done = match simd {
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
            assert!(is_x86_feature_detected!("avx512f"));
            // SAFETY: the feature is present, checked above.
            unsafe { super::x86::swiglu_avx512(g, u, w, limit, up_limit, h) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: the features are present, checked above.
            unsafe { super::x86::swiglu_avx2(g, u, w, limit, up_limit, h) }
        }
        _ => 0,
    };
    for ((o, &gv), &uv) in h[done..].iter_mut().zip(&g[done..]).zip(&u[done..]) {
        let gc = if limit < gv { limit } else { gv };
        *o = w * (silu(gc) * uv.clamp(-up_limit, up_limit));
    }
}
