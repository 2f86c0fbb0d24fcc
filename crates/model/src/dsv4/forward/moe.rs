//! The mixture of experts: router (biased or hash), routed MXFP4 experts grouped by expert, shared expert, join.

use super::{Pass, linear, ops};
use crate::dsv4::weights::{Expert, Moe, Routing};

/// Runs the MoE on normed rows `x` `[rows, D]`, returning `[rows, D]`.
pub(crate) fn moe(pass: &Pass<'_>, w: &Moe, x: &[f32]) -> Vec<f32> {
    let c = &pass.model.config;
    let (rows, d, k) = (pass.rows(), c.hidden_size, c.num_experts_per_tok);
    let limit = c.swiglu_limit as f32;
    let scale = c.routed_scaling_factor as f32;
    let logits = linear::bf16(pass, x, &w.gate);
    let (mut idx, mut weights) = (vec![0i32; rows * k], vec![0f32; rows * k]);
    match &w.routing {
        Routing::Bias(bias) => ops::router(&pass.device, &logits, bias, k, scale, &mut idx, &mut weights),
        Routing::Hash(table) => ops::hash_router(
            &pass.device,
            &logits,
            &pass.token_ids,
            table,
            c.n_routed_experts,
            k,
            scale,
            &mut idx,
            &mut weights,
        ),
    }
    let routed = match &pass.ranks {
        Some(ranks) => ranks.experts(pass, w, x, &idx, &weights),
        None => {
            let mut routed = vec![0f32; rows * k * d];
            for (e, expert) in w.experts.iter().enumerate() {
                let Some(y) = expert_rows(pass, expert, e, x, &idx, &weights, k) else {
                    continue;
                };
                let slots = (0..rows * k).filter(|&s| idx[s] as usize == e);
                for (i, s) in slots.enumerate() {
                    routed[s * d..(s + 1) * d].copy_from_slice(&y[i * d..(i + 1) * d]);
                }
            }
            routed
        }
    };
    let shared = match &w.shared {
        Some(sh) => {
            let g = linear::fp8(pass, x, &sh.w1);
            let u = linear::fp8(pass, x, &sh.w3);
            let mut h = vec![0f32; g.len()];
            ops::swiglu(&pass.device, &g, &u, &vec![1.0; rows], limit, &mut h);
            linear::fp8(pass, &h, &sh.w2)
        }
        None => vec![0f32; rows * d],
    };
    let mut out = vec![0f32; rows * d];
    ops::moe_join(&pass.device, &routed, &shared, k, d, &mut out);
    out
}

/// Expert `e` on the rows routed to it (ascending slot order), `[slots, D]`; `None` when no row picked it.
pub(crate) fn expert_rows(
    pass: &Pass<'_>,
    expert: &Expert,
    e: usize,
    x: &[f32],
    idx: &[i32],
    weights: &[f32],
    k: usize,
) -> Option<Vec<f32>> {
    let c = &pass.model.config;
    let d = c.hidden_size;
    let slots: Vec<usize> = (0..idx.len()).filter(|&s| idx[s] as usize == e).collect();
    if slots.is_empty() {
        return None;
    }
    let xe: Vec<f32> = slots
        .iter()
        .flat_map(|&s| x[s / k * d..(s / k + 1) * d].iter().copied())
        .collect();
    let route: Vec<f32> = slots.iter().map(|&s| weights[s]).collect();
    let g = linear::mxfp4(pass, &xe, &expert.w1);
    let u = linear::mxfp4(pass, &xe, &expert.w3);
    let mut h = vec![0f32; g.len()];
    ops::swiglu(&pass.device, &g, &u, &route, c.swiglu_limit as f32, &mut h);
    Some(linear::mxfp4(pass, &h, &expert.w2))
}
