//! The mixture of experts: router (biased or hash), routed MXFP4 experts (by slot on the GPU at decode, else grouped by expert), shared expert, join.

use super::act::Act;
use super::quant::{self, Quant};
use super::{Pass, linear, ops, slots};
use crate::dsv4::weights::{Expert, Moe, Routing, SharedExpert};

/// Runs the MoE on normed rows `x` `[rows, D]` (`quant` their act_quant where made), returning `[rows, D]`.
pub(crate) fn moe(pass: &Pass<'_>, w: &Moe, x: &Act, quant: Option<&Quant>) -> Act {
    let c = &pass.model.config;
    let dev = &pass.device;
    let (rows, d, k) = (pass.rows(), c.hidden_size, c.num_experts_per_tok);
    let scale = c.routed_scaling_factor as f32;
    // The shared expert runs beside the router and the routed experts.
    let mut shared = match &w.shared {
        Some(_) => dev.alloc(rows * d),
        None => dev.zeros(rows * d),
    };
    let (branch, ()) = dev.beside(|| {
        if let Some(sh) = &w.shared {
            shared_expert(pass, sh, x, quant, &mut shared);
        }
    });
    let logits = linear::bf16(pass, x, &w.gate);
    let (mut idx, mut weights) = (dev.alloc::<i32>(rows * k), dev.alloc(rows * k));
    let out = ops::Routed {
        idx: &mut idx,
        weights: &mut weights,
    };
    match &w.routing {
        Routing::Bias(bias) => ops::router(dev, &logits, bias, k, scale, out),
        Routing::Hash(table) => ops::hash_router(dev, &logits, &pass.ids, table, c.n_routed_experts, k, scale, out),
    }
    let routed = if slots::by_slot(pass) {
        slots::routed(pass, w, x, quant, &idx, &weights)
    } else {
        grouped(pass, w, x, idx, weights)
    };
    // The join: the process stream waits for the shared expert.
    drop(branch);
    let mut out = dev.alloc(rows * d);
    ops::moe_join(dev, &routed, &shared, k, d, &mut out);
    out
}

/// The shared expert on normed rows `x` (`quant` their act_quant where made), into `out` `[rows, D]`.
fn shared_expert(pass: &Pass<'_>, sh: &SharedExpert, x: &Act, quant: Option<&Quant>, out: &mut Act) {
    let dev = &pass.device;
    let limit = pass.model.config.swiglu_limit as f32;
    let mut gu = quant::fp8(pass, x, quant, &[&sh.w1, &sh.w3]);
    let (u, g) = (gu.pop().expect("w3 output"), gu.pop().expect("w1 output"));
    let mut h = dev.alloc(g.len());
    let hq = quant::swiglu(pass, &g, &u, &dev.fill(pass.rows(), 1.0), limit, &mut h);
    quant::fp8_into(pass, &h, hq.as_ref(), &sh.w2, out);
}

/// The routed experts grouped by expert on the host (or by rank), `[rows * k, D]` in slot order.
fn grouped(pass: &Pass<'_>, w: &Moe, x: &Act, idx: Act<i32>, weights: Act) -> Act {
    let c = &pass.model.config;
    let dev = &pass.device;
    let (rows, d, k) = (pass.rows(), c.hidden_size, c.num_experts_per_tok);
    // The host picks each expert's weights, so the choices come back.
    let (idx, weights) = (idx.into_vec(dev), weights.into_vec(dev));
    if let Some(ranks) = &pass.ranks {
        return dev.put(ranks.experts(pass, w, &x.to_vec(dev), &idx, &weights));
    }
    let n = rows * k;
    let (order, spans) = expert_order(&idx, w.experts.len());
    let from = dev.put(order.iter().map(|&s| (s / k) as i32).collect());
    let mut xs = dev.alloc(n * d);
    ops::gather_rows(dev, x, d, &from, &mut xs);
    let route = dev.put(order.iter().map(|&s| weights[s]).collect());
    let ys = if slots::grouped_on_gpu(pass) {
        slots::grouped(pass, w, &xs, &route, &spans)
    } else {
        let mut ys = dev.zeros(n * d);
        for (expert, &(at, len)) in w.experts.iter().zip(&spans).filter(|(_, s)| s.1 > 0) {
            let (span, local): (Vec<usize>, Vec<usize>) = ((at..at + len).collect(), (0..len).collect());
            let (mut xe, mut re) = (dev.alloc(len * d), dev.alloc(len));
            xe.copy_rows(dev, &local, &xs, &span, d);
            re.copy_rows(dev, &local, &route, &span, 1);
            ys.copy_rows(dev, &span, &expert_out(pass, expert, &xe, &re), &local, d);
        }
        ys
    };
    // Each slot's row back from its place in the expert order.
    let mut pos = vec![0i32; n];
    for (p, &s) in order.iter().enumerate() {
        pos[s] = p as i32;
    }
    let mut routed = dev.alloc(n * d);
    ops::gather_rows(dev, &ys, d, &dev.put(pos), &mut routed);
    routed
}

/// The slots expert by expert, ascending within each expert (the order the experts' rows run in), and each of the `experts` experts' first place and count in it; slots naming no expert come first or last and belong to none.
fn expert_order(idx: &[i32], experts: usize) -> (Vec<usize>, Vec<(usize, usize)>) {
    let mut order: Vec<usize> = (0..idx.len()).collect();
    order.sort_by_key(|&s| idx[s]);
    let mut at = order.partition_point(|&s| idx[s] < 0);
    let spans = (0..experts)
        .map(|e| {
            let len = order[at..].iter().take_while(|&&s| idx[s] as usize == e).count();
            at += len;
            (at - len, len)
        })
        .collect();
    (order, spans)
}

/// Expert `e` on the rows routed to it (ascending slot order), `[slots, D]`; `None` when no row picked it.
pub(crate) fn expert_rows(
    pass: &Pass<'_>,
    expert: &Expert,
    e: usize,
    x: &Act,
    idx: &[i32],
    weights: &[f32],
    k: usize,
) -> Option<Act> {
    let dev = &pass.device;
    let d = pass.model.config.hidden_size;
    let slots: Vec<usize> = (0..idx.len()).filter(|&s| idx[s] as usize == e).collect();
    if slots.is_empty() {
        return None;
    }
    let mut xe = dev.zeros(slots.len() * d);
    let from: Vec<usize> = slots.iter().map(|&s| s / k).collect();
    xe.copy_rows(dev, &(0..slots.len()).collect::<Vec<_>>(), x, &from, d);
    let route = dev.put(slots.iter().map(|&s| weights[s]).collect());
    Some(expert_out(pass, expert, &xe, &route))
}

/// An expert's output rows `[rows, D]` for its input rows `xe` and their route weights.
fn expert_out(pass: &Pass<'_>, expert: &Expert, xe: &Act, route: &Act) -> Act {
    let dev = &pass.device;
    let g = linear::mxfp4(pass, xe, &expert.w1);
    let u = linear::mxfp4(pass, xe, &expert.w3);
    let mut h = dev.alloc(g.len());
    ops::swiglu(dev, &g, &u, route, pass.model.config.swiglu_limit as f32, &mut h);
    linear::mxfp4(pass, &h, &expert.w2)
}

#[cfg(test)]
mod tests {
    use super::expert_order;

    #[test]
    fn expert_order_runs_each_experts_slots_ascending_and_skips_strays() {
        let idx = [2, 0, 2, -1, 5, 0, 1, 2];
        let (order, spans) = expert_order(&idx, 4);
        assert_eq!(order, vec![3, 1, 5, 6, 0, 2, 7, 4]);
        assert_eq!(spans, vec![(1, 2), (3, 1), (4, 3), (7, 0)]);
        for (e, &(at, len)) in spans.iter().enumerate() {
            assert!(order[at..at + len].iter().all(|&s| idx[s] == e as i32));
        }
    }
}
