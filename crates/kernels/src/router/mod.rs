//! `router`: DeepSeek V4 noaux_tc gate, top-k of `sqrt(softplus(z)) + bias`, weights `s[idx] / sum(s[idx]) * scale`.

mod cpu;
pub mod cuda;

pub(crate) use cpu::par_rows2;
pub use cpu::{MAX_TOPK, router};
pub use cuda::router_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// V4-Flash's routed_scaling_factor.
const SCALE: f32 = 1.5;

pub struct Router;

/// `sqrt(softplus(z))` in float64.
pub(crate) fn sqrt_softplus_f64(z: f32) -> f64 {
    let z = z as f64;
    (z.max(0.0) + (-z.abs()).exp().ln_1p()).sqrt()
}

impl Kernel for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 1e-7,
            rel: 4e-6,
            why: "FMA-polynomial softplus (a few ulp), a sqrt, a k-term sum, one divide, one multiply: ~12 ulp",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, experts, k, ties) in [
            (1, 256, 6, 0),
            (17, 256, 6, 0),
            (5, 256, 6, 1),
            (31, 8, 2, 0),
            (257, 8, 2, 1),
            (7, 17, 5, 0),
            (3, 1, 1, 0),
            (13, 31, 31, 1),
            (4, 384, 6, 0),
        ] {
            cases.push(Case::new(rows, &[("experts", experts), ("k", k), ("ties", ties)]));
        }
        // NaN logits: a whole row of them, a row with some, a clean row (a NaN score ranks as -inf, so every pick is a real expert).
        cases.push(Case::new(3, &[("experts", 256), ("k", 6), ("ties", 0), ("nan", 1)]));
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let experts = case.get("experts");
        let ties = case.get("ties") == 1;
        let nan = case.opt("nan") == Some(1);
        // Tie cases draw logits and biases from coarse grids, so equal scores are common and exact.
        let logits: Vec<f32> = (0..case.rows * experts)
            .map(|i| {
                if nan && (i / experts == 0 || (i / experts == 1 && i % 5 == 0)) {
                    f32::NAN
                } else if ties {
                    (rng.below(9) as f32 - 4.0) * 0.5
                } else {
                    2.0 * rng.normal()
                }
            })
            .collect();
        let bias: Vec<f32> = (0..experts)
            .map(|_| {
                if ties {
                    rng.below(2) as f32 * 0.25
                } else {
                    0.05 * rng.normal()
                }
            })
            .collect();
        vec![
            Arg::per_row("logits", Buf::F32(logits), experts),
            Arg::shared("bias", Buf::F32(bias)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        let k = case.get("k");
        vec![
            OutSpec {
                name: "idx",
                kind: OutKind::I32,
                row_len: k,
            },
            OutSpec {
                name: "weights",
                kind: OutKind::F32,
                row_len: k,
            },
        ]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (experts, k) = (case.get("experts"), case.get("k"));
        let (logits, bias) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let (mut idx, mut weights) = (Vec::new(), Vec::new());
        for z in logits.chunks(experts) {
            let s: Vec<f64> = z.iter().map(|&v| sqrt_softplus_f64(v)).collect();
            let mut order: Vec<usize> = (0..experts).collect();
            let score = |e: usize| {
                Some(s[e] + bias[e] as f64)
                    .filter(|v| !v.is_nan())
                    .unwrap_or(f64::NEG_INFINITY)
            };
            order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
            let sum: f64 = order[..k].iter().map(|&e| s[e]).sum();
            idx.extend(order[..k].iter().map(|&e| e as f64));
            weights.extend(order[..k].iter().map(|&e| s[e] / sum * SCALE as f64));
        }
        vec![idx, weights]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_bias", "ties_to_higher_id", "drop_last_in_sum"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let [idx, weights] = out else {
            panic!("router has two outputs")
        };
        let (logits, bias, k) = (inputs[0].buf.f32(), inputs[1].buf.f32(), case.get("k"));
        match launch {
            Launch::Cpu(l) => router(logits, bias, k, SCALE, idx.i32(), weights.f32(), l, faults),
            Launch::Cuda(c) => router_cuda(c, logits, bias, k, SCALE, idx.i32(), weights.f32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
