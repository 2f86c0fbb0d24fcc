//! CPU `grouped_proj`: DeepSeek V4's grouped output projection `wo_a`, on `fp8_gemm`'s weights and tiles.

use crate::cpu::CpuLaunch;
use crate::faults::Faults;
use crate::fp8_gemm::{BLOCK, Fp8Weights, LAYOUT};
use crate::gemm::act::Fp8Rows;
use crate::gemm::{Problem, run_pairs};

/// `out[r, i * o_lora + j]` = fp8_gemm of group i of `o[r]` (act_quant per 128 from the group's start) and wo_a row i * o_lora + j.
#[allow(clippy::too_many_arguments)]
pub fn grouped_proj(
    o: &[f32],
    wo_a: &[u8],
    wo_a_scale: &[u8],
    groups: usize,
    o_lora: usize,
    group_dim: usize,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let n = groups * o_lora;
    assert!(n > 0 && group_dim > 0, "grouped_proj: empty projection");
    assert_eq!(
        wo_a.len(),
        n * group_dim,
        "grouped_proj: wo_a is not [{n}, {group_dim}]"
    );
    assert_eq!(
        wo_a_scale.len(),
        n.div_ceil(BLOCK) * group_dim.div_ceil(BLOCK),
        "grouped_proj: scale grid"
    );
    assert_eq!(
        o.len() % (groups * group_dim),
        0,
        "grouped_proj: o is not whole rows of {groups} x {group_dim}"
    );
    let rows = o.len() / (groups * group_dim);
    assert_eq!(out.len(), rows * n, "grouped_proj: output is not [{rows}, {n}]");
    // Each group of each row is its own activation row, quantised per 128 from the group's start.
    let act = Fp8Rows::quantise(o, group_dim, LAYOUT);
    // Planted: every column reads the first group's activations.
    let group_cols = if faults.on("wrong_group") { n } else { o_lora };
    let problem = Problem {
        act: &act,
        rows,
        n,
        groups,
        group_cols,
    };
    let weights = Fp8Weights {
        w: wo_a,
        w_scale: wo_a_scale,
        k: group_dim,
    };
    run_pairs(&weights, &problem, out, launch, faults);
}
