//! The contract's row-group runs: a batch's rows in groups of up to 64, alternating between experts 1 and 3 of a four-expert table (both the case's weights at different addresses; experts 0 and 2 hold other weights).

use super::cuda::{GROUP_ROWS, KERNEL, mxfp4_gemm_grouped_cuda, mxfp4_quantise_cuda};
use super::slots::case_table;
use crate::contract::Case;
use crate::cuda;
use crate::faults::Faults;

/// Whether `case` asks for the row-group entry.
pub(super) fn marked(case: &Case) -> bool {
    case.opt("grouped").is_some()
}

/// `mxfp4_gemm` through `mxfp4_gemm_grouped`; a group that read another group's expert, or a neighbour's, would meet other weights.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    launch: &cuda::CudaLaunch,
    x: &[f32],
    w: &[u8],
    s: &[u8],
    n: usize,
    k: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let gpu = cuda::gpu()?;
    gpu.function(&KERNEL, "mxfp4_gemm_grouped", faults)?;
    let (bufs, table) = case_table(gpu, w, s, &[false, true, false, true])?;
    let groups = groups(out.len() / n.max(1));
    let r = mxfp4_quantise_cuda(launch, x, k, faults)
        .and_then(|q| mxfp4_gemm_grouped_cuda(launch, q.view(), &table, &groups, n, k, out, faults));
    gpu.sync()?;
    drop(bufs);
    r
}

/// Rows `0..rows` in groups of 64, 1, 37, 64, 5 and 23 rows in turn (the last cut short), experts 1 and 3 in turn.
fn groups(rows: usize) -> Vec<[i32; 3]> {
    let mut out = Vec::new();
    let mut at = 0;
    for (i, len) in [GROUP_ROWS, 1, 37, GROUP_ROWS, 5, 23].into_iter().cycle().enumerate() {
        if at >= rows {
            break;
        }
        let len = len.min(rows - at);
        out.push([if i % 2 == 0 { 1 } else { 3 }, at as i32, len as i32]);
        at += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::groups;

    #[test]
    fn groups_cover_every_row_once_in_order() {
        for rows in [1usize, 17, 64, 65, 130, 300] {
            let g = groups(rows);
            let mut at = 0;
            for &[e, r0, len] in &g {
                assert!(e == 1 || e == 3);
                assert_eq!(r0 as usize, at);
                assert!((1..=64).contains(&len));
                at += len as usize;
            }
            assert_eq!(at, rows);
        }
    }
}
