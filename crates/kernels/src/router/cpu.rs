//! CPU `router`: rows split over threads; sqrt-softplus scores, an insertion top-k in expert order, weights in slot order.

use crate::cpu::CpuLaunch;
use crate::cpu::math::softplus;
use crate::faults::Faults;

/// Most experts one token may select.
pub const MAX_TOPK: usize = 32;

/// Top-`k` experts of `sqrt(softplus(z)) + bias` per row of `bias.len()` logits (ties: lower id), and their weights.
#[allow(clippy::too_many_arguments)]
pub fn router(
    logits: &[f32],
    bias: &[f32],
    k: usize,
    routed_scaling_factor: f32,
    idx: &mut [i32],
    weights: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let num_experts = bias.len();
    assert!(
        (1..=MAX_TOPK.min(num_experts)).contains(&k),
        "router: k {k} outside 1..={}",
        MAX_TOPK.min(num_experts)
    );
    assert_eq!(
        logits.len() % num_experts,
        0,
        "router: logits are not whole rows of {num_experts}"
    );
    let rows = logits.len() / num_experts;
    assert_eq!(
        (idx.len(), weights.len()),
        (rows * k, rows * k),
        "router: idx and weights must be [rows, {k}]"
    );
    let skip_bias = faults.on("skip_bias");
    let ties_high = faults.on("ties_to_higher_id");
    let short_sum = faults.on("drop_last_in_sum");
    par_rows2(idx, weights, k, launch.threads, |first_row, idx, weights| {
        let mut scores = vec![0f32; num_experts];
        for (i, (idx, weights)) in idx.chunks_mut(k).zip(weights.chunks_mut(k)).enumerate() {
            let z = &logits[(first_row + i) * num_experts..(first_row + i + 1) * num_experts];
            for (s, &v) in scores.iter_mut().zip(z) {
                *s = softplus(v).sqrt();
            }
            let (mut best_idx, mut best_val) = ([0usize; MAX_TOPK], [0f32; MAX_TOPK]);
            let mut len = 0;
            for (e, (&s, &b)) in scores.iter().zip(bias).enumerate() {
                let v = if skip_bias { s } else { s + b };
                // A NaN score ranks as -inf.
                let v = if v.is_nan() { f32::NEG_INFINITY } else { v };
                let beats = |w: f32| if ties_high { v >= w } else { v > w };
                if len == k && !beats(best_val[k - 1]) {
                    continue;
                }
                let mut p = len.min(k - 1);
                while p > 0 && beats(best_val[p - 1]) {
                    best_idx[p] = best_idx[p - 1];
                    best_val[p] = best_val[p - 1];
                    p -= 1;
                }
                best_idx[p] = e;
                best_val[p] = v;
                len = (len + 1).min(k);
            }
            let used = if short_sum { k - 1 } else { k };
            let sum = best_idx[..used].iter().map(|&e| scores[e]).sum::<f32>();
            for ((o, w), &e) in idx.iter_mut().zip(weights.iter_mut()).zip(&best_idx[..k]) {
                *o = e as i32;
                *w = scores[e] / sum * routed_scaling_factor;
            }
        }
    });
}

/// Calls `f(first_row, a_rows, b_rows)` on up to `threads` threads for two outputs of `row_len` values per row.
pub(crate) fn par_rows2<A: Send, B: Send>(
    a: &mut [A],
    b: &mut [B],
    row_len: usize,
    threads: usize,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    let rows = a.len() / row_len.max(1);
    let threads = threads.clamp(1, rows.max(1));
    if threads == 1 {
        f(0, a, b);
        return;
    }
    let per = rows.div_ceil(threads) * row_len;
    std::thread::scope(|s| {
        for (t, (a, b)) in a.chunks_mut(per).zip(b.chunks_mut(per)).enumerate() {
            let f = &f;
            s.spawn(move || f(t * per / row_len, a, b));
        }
    });
}
