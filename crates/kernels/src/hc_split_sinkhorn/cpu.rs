//! CPU `hc_split_sinkhorn`: rows split over threads; each row's weights and Sinkhorn passes in fixed scalar order.

use crate::cpu::CpuLaunch;
use crate::cpu::math::{exp, sigmoid};
use crate::faults::Faults;

/// Largest hc_mult the stack buffers hold.
pub const MAX_HC: usize = 16;

/// Splits `mix` rows [(2 + hc) * hc] into `pre` [hc], `post` [hc] and the Sinkhorn-projected `comb` [hc, hc].
#[allow(clippy::too_many_arguments)]
pub fn hc_split_sinkhorn(
    mix: &[f32],
    scale: &[f32],
    base: &[f32],
    hc: usize,
    iters: usize,
    eps: f32,
    pre: &mut [f32],
    post: &mut [f32],
    comb: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let width = (2 + hc) * hc;
    assert!(
        (1..=MAX_HC).contains(&hc),
        "hc_split_sinkhorn: hc {hc} outside 1..={MAX_HC}"
    );
    assert!(iters >= 1, "hc_split_sinkhorn: at least one Sinkhorn iteration");
    assert_eq!(
        (scale.len(), base.len()),
        (3, width),
        "hc_split_sinkhorn: scale must be [3], base [{width}]"
    );
    assert_eq!(
        mix.len() % width,
        0,
        "hc_split_sinkhorn: mix is not whole rows of {width}"
    );
    let rows = mix.len() / width;
    assert_eq!(
        (pre.len(), post.len(), comb.len()),
        (rows * hc, rows * hc, rows * hc * hc),
        "hc_split_sinkhorn: pre and post must be [rows, {hc}], comb [rows, {hc}, {hc}]"
    );
    let threads = launch.threads.clamp(1, rows.max(1));
    let per = rows.div_ceil(threads).max(1);
    let work = |first_row: usize, pre: &mut [f32], post: &mut [f32], comb: &mut [f32]| {
        let skip_last = faults.on("skip_last_row");
        let lost_comb_scale = faults.on("lost_comb_scale");
        let transposed = faults.on("transposed_comb");
        let outs = pre
            .chunks_mut(hc)
            .zip(post.chunks_mut(hc))
            .zip(comb.chunks_mut(hc * hc));
        for (i, ((pre, post), comb)) in outs.enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == rows {
                continue;
            }
            let comb_scale = if lost_comb_scale { 1.0 } else { scale[2] };
            let m = &mix[r * width..(r + 1) * width];
            split_row(
                m,
                [scale[0], scale[1], comb_scale],
                base,
                hc,
                iters,
                eps,
                pre,
                post,
                comb,
            );
            if transposed {
                for a in 0..hc {
                    for b in 0..a {
                        comb.swap(a * hc + b, b * hc + a);
                    }
                }
            }
        }
    };
    if threads == 1 {
        work(0, pre, post, comb);
        return;
    }
    std::thread::scope(|s| {
        let chunks = pre
            .chunks_mut(per * hc)
            .zip(post.chunks_mut(per * hc))
            .zip(comb.chunks_mut(per * hc * hc));
        for (t, ((pre, post), comb)) in chunks.enumerate() {
            let work = &work;
            s.spawn(move || work(t * per, pre, post, comb));
        }
    });
}

/// One row: sigmoid gates, row softmax + eps, a column pass, then `iters - 1` (row, column) passes.
#[allow(clippy::too_many_arguments)]
fn split_row(
    mix: &[f32],
    scale: [f32; 3],
    base: &[f32],
    hc: usize,
    iters: usize,
    eps: f32,
    pre: &mut [f32],
    post: &mut [f32],
    comb: &mut [f32],
) {
    for j in 0..hc {
        pre[j] = sigmoid(mix[j].mul_add(scale[0], base[j])) + eps;
        post[j] = 2.0 * sigmoid(mix[hc + j].mul_add(scale[1], base[hc + j]));
    }
    let mut c = [0f32; MAX_HC * MAX_HC];
    let c = &mut c[..hc * hc];
    for (k, v) in c.iter_mut().enumerate() {
        *v = mix[2 * hc + k].mul_add(scale[2], base[2 * hc + k]);
    }
    for row in c.chunks_mut(hc) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let mut sum = 0f32;
        for v in row.iter_mut() {
            *v = exp(*v - max);
            sum += *v;
        }
        for v in row.iter_mut() {
            *v = *v / sum + eps;
        }
    }
    normalise_columns(c, hc, eps);
    for _ in 1..iters {
        for row in c.chunks_mut(hc) {
            let denom = row.iter().sum::<f32>() + eps;
            for v in row.iter_mut() {
                *v /= denom;
            }
        }
        normalise_columns(c, hc, eps);
    }
    comb.copy_from_slice(c);
}

/// Divides each column by (its sum over rows in ascending order + eps).
fn normalise_columns(c: &mut [f32], hc: usize, eps: f32) {
    for j in 0..hc {
        let denom = (0..hc).map(|i| c[i * hc + j]).sum::<f32>() + eps;
        for i in 0..hc {
            c[i * hc + j] /= denom;
        }
    }
}
