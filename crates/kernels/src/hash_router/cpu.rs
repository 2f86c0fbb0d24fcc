//! CPU `hash_router`: rows split over threads; experts from the token's table row, weights from sqrt-softplus scores.

use crate::cpu::CpuLaunch;
use crate::cpu::math::softplus;
use crate::faults::Faults;
use crate::router::par_rows2;

/// `idx = tid2eid[token_id]` ([vocab, k]) per row of `num_experts` logits; weights `s[idx] / sum(s[idx]) * scale`.
#[allow(clippy::too_many_arguments)]
pub fn hash_router(
    logits: &[f32],
    token_ids: &[i32],
    tid2eid: &[i32],
    num_experts: usize,
    k: usize,
    routed_scaling_factor: f32,
    idx: &mut [i32],
    weights: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(
        k > 0 && tid2eid.len().is_multiple_of(k),
        "hash_router: tid2eid is not whole rows of {k}"
    );
    let vocab = tid2eid.len() / k;
    let rows = token_ids.len();
    assert_eq!(
        logits.len(),
        rows * num_experts,
        "hash_router: logits must be [rows, {num_experts}]"
    );
    assert_eq!(
        (idx.len(), weights.len()),
        (rows * k, rows * k),
        "hash_router: idx and weights must be [rows, {k}]"
    );
    let skip_last = faults.on("skip_last_row");
    let next_token = faults.on("off_by_one_token");
    let short_sum = faults.on("drop_last_in_sum");
    par_rows2(idx, weights, k, launch.threads, |first_row, idx, weights| {
        for (i, (idx, weights)) in idx.chunks_mut(k).zip(weights.chunks_mut(k)).enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == rows {
                continue;
            }
            let token = usize::try_from(token_ids[r]).expect("hash_router: negative token id");
            assert!(
                token < vocab,
                "hash_router: token id {token} outside the {vocab}-entry table"
            );
            let token = if next_token { (token + 1) % vocab } else { token };
            let experts = &tid2eid[token * k..(token + 1) * k];
            let z = &logits[r * num_experts..(r + 1) * num_experts];
            for ((o, w), &e) in idx.iter_mut().zip(weights.iter_mut()).zip(experts) {
                let e_idx = usize::try_from(e).ok().filter(|&e| e < num_experts);
                let e_idx = e_idx.unwrap_or_else(|| panic!("hash_router: expert id {e} outside 0..{num_experts}"));
                *o = e;
                *w = softplus(z[e_idx]).sqrt();
            }
            let used = if short_sum { k - 1 } else { k };
            let sum = weights[..used].iter().sum::<f32>();
            for w in weights.iter_mut() {
                *w = *w / sum * routed_scaling_factor;
            }
        }
    });
}
