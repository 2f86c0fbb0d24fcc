//! The mixture of experts: biased router, routed MXFP4 experts grouped by expert, shared expert, join (no hash layers).

use tensorfold_kernels::moe_join::moe_join;
use tensorfold_kernels::router::router;
use tensorfold_kernels::swiglu::swiglu;

use super::{Pass, linear};
use crate::dsv41::weights::Moe;

/// Runs the MoE on normed rows `x` `[rows, D]`, returning `[rows, D]`.
pub(crate) fn moe(pass: &Pass<'_>, w: &Moe, x: &[f32]) -> Vec<f32> {
    let c = &pass.model.config;
    let (rows, d, k) = (pass.rows(), c.hidden_size, w.top_k);
    let (l, f) = pass.faults();
    let limit = c.swiglu_limit as f32;
    let logits = linear::bf16(pass, x, &w.gate); // [rows, E]
    let (mut idx, mut weights) = (vec![0i32; rows * k], vec![0f32; rows * k]);
    router(
        &logits,
        &w.bias,
        k,
        c.routed_scaling_factor as f32,
        &mut idx,
        &mut weights,
        l,
        f,
    );
    let mut routed = vec![0f32; rows * k * d];
    for (e, expert) in w.experts.iter().enumerate() {
        let slots: Vec<usize> = (0..rows * k).filter(|&s| idx[s] as usize == e).collect();
        if slots.is_empty() {
            continue;
        }
        let xe: Vec<f32> = slots
            .iter()
            .flat_map(|&s| x[s / k * d..(s / k + 1) * d].iter().copied())
            .collect();
        let route: Vec<f32> = slots.iter().map(|&s| weights[s]).collect();
        let g = linear::mxfp4(pass, &xe, &expert.w1);
        let u = linear::mxfp4(pass, &xe, &expert.w3);
        let mut h = vec![0f32; g.len()];
        swiglu(&g, &u, &route, limit, &mut h, l, f);
        let y = linear::mxfp4(pass, &h, &expert.w2);
        for (i, &s) in slots.iter().enumerate() {
            routed[s * d..(s + 1) * d].copy_from_slice(&y[i * d..(i + 1) * d]);
        }
    }
    let shared = match &w.shared {
        Some([w1, w2, w3]) => {
            let g = linear::dense(pass, x, w1);
            let u = linear::dense(pass, x, w3);
            let mut h = vec![0f32; g.len()];
            swiglu(&g, &u, &vec![1.0; rows], limit, &mut h, l, f);
            linear::dense(pass, &h, w2)
        }
        None => vec![0f32; rows * d],
    };
    let mut out = vec![0f32; rows * d];
    moe_join(&routed, &shared, k, d, &mut out, l, f);
    out
}
