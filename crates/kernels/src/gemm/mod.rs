//! Shared pieces of the GEMM kernels: FP8 activation rows, column splits over threads, the pair-tile driver.

pub mod act;
#[cfg(target_arch = "x86_64")]
mod act_x86;
mod cols;
pub mod groups;
mod pool;
pub mod reference;
mod tiles;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

pub use cols::par_columns;
pub use pool::{run_chunks, run_parts};
pub(crate) use tiles::{BlockWeights, GROUP, PAIRS, Problem, row_panel, run_pairs};

use crate::cpu::{CpuLaunch, SimdPath};

/// Panics unless this CPU can run `simd` (launching an unavailable path would be undefined behaviour).
pub fn assert_simd(simd: SimdPath) {
    assert!(
        SimdPath::available().contains(&simd),
        "SIMD path {simd} is not available on this CPU"
    );
}

/// `assert_simd` for each path `launch` runs: `simd`, and the one-row GEMVs' where it differs.
pub fn assert_launch(launch: &CpuLaunch) {
    assert_simd(launch.simd);
    if let Some(g) = launch.gemv_simd.filter(|&g| g != launch.simd) {
        assert_simd(g);
    }
}
