//! CPU `hadamard`: segments split over threads, in-place butterflies in a fixed stage order, then one scale.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// Walsh-Hadamard transform (Sylvester order) of every `n`-value segment of `x` in place, scaled by `n^-0.5`.
pub fn hadamard(x: &mut [f32], n: usize, launch: &CpuLaunch, faults: Faults) {
    assert!(n.is_power_of_two(), "hadamard: size {n} is not a power of two");
    assert_eq!(
        x.len() % n,
        0,
        "hadamard: {} values are not whole segments of {n}",
        x.len()
    );
    let segments = x.len() / n;
    let tile = launch.tile_rows.min(segments.max(1));
    let scale = if faults.on("lost_scale") {
        1.0
    } else {
        (1.0 / (n as f64).sqrt()) as f32
    };
    let skip_last = faults.on("skip_last_segment");
    let reversed = faults.on("stages_by_threads") && launch.threads > 1;
    par_chunks_mut(x, n, launch.split_threads(x.len()), |first, chunk| {
        for (tile_idx, tile_segs) in chunk.chunks_mut(tile * n).enumerate() {
            for (i, seg) in tile_segs.chunks_mut(n).enumerate() {
                if skip_last && first + tile_idx * tile + i + 1 == segments {
                    continue;
                }
                let mut h = if reversed { n / 2 } else { 1 };
                while h >= 1 && h < n {
                    for pair in seg.chunks_exact_mut(2 * h) {
                        let (lo, hi) = pair.split_at_mut(h);
                        for (a, b) in lo.iter_mut().zip(hi) {
                            (*a, *b) = (*a + *b, *a - *b);
                        }
                    }
                    h = if reversed { h / 2 } else { h * 2 };
                }
                for v in seg.iter_mut() {
                    *v *= scale;
                }
            }
        }
    });
}
