//! `hash_router`: the gate of V4's first num_hash_layers, experts `tid2eid[token_id]` and sqrt-softplus weights, no bias.

mod cpu;
pub mod cuda;

pub use cpu::hash_router;
pub use cuda::hash_router_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;
use crate::router::sqrt_softplus_f64;

/// V4-Flash's routed_scaling_factor.
const SCALE: f32 = 1.5;

pub struct HashRouter;

impl Kernel for HashRouter {
    fn name(&self) -> &'static str {
        "hash_router"
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
        for (rows, experts, k, vocab) in [
            (1, 256, 6, 1000),
            (17, 256, 6, 1000),
            (31, 8, 2, 257),
            (7, 17, 5, 31),
            (3, 1, 1, 1),
            (4, 256, 6, 129280),
        ] {
            cases.push(Case::new(rows, &[("experts", experts), ("k", k), ("vocab", vocab)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (experts, k, vocab) = (case.get("experts"), case.get("k"), case.get("vocab"));
        let logits: Vec<f32> = (0..case.rows * experts).map(|_| 2.0 * rng.normal()).collect();
        // The first and last table rows always appear; repeated experts within a row are allowed, as in a table.
        let token_ids: Vec<i32> = (0..case.rows)
            .map(|r| match r {
                0 => vocab - 1,
                1 => 0,
                _ => rng.below(vocab as u64) as usize,
            } as i32)
            .collect();
        let tid2eid: Vec<i32> = (0..vocab * k).map(|_| rng.below(experts as u64) as i32).collect();
        vec![
            Arg::per_row("logits", Buf::F32(logits), experts),
            Arg::per_row("token_ids", Buf::I32(token_ids), 1),
            Arg::shared("tid2eid", Buf::I32(tid2eid)),
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
        let (logits, token_ids, tid2eid) = (inputs[0].buf.f32(), inputs[1].buf.i32(), inputs[2].buf.i32());
        let (mut idx, mut weights) = (Vec::new(), Vec::new());
        for (z, &t) in logits.chunks(experts).zip(token_ids) {
            let chosen = &tid2eid[t as usize * k..(t as usize + 1) * k];
            let s: Vec<f64> = chosen.iter().map(|&e| sqrt_softplus_f64(z[e as usize])).collect();
            let sum: f64 = s.iter().sum();
            idx.extend(chosen.iter().map(|&e| e as f64));
            weights.extend(s.iter().map(|v| v / sum * SCALE as f64));
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
        &["skip_last_row", "off_by_one_token", "drop_last_in_sum"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let [idx, weights] = out else {
            panic!("hash_router has two outputs")
        };
        let (experts, k) = (case.get("experts"), case.get("k"));
        let (logits, token_ids, tid2eid) = (inputs[0].buf.f32(), inputs[1].buf.i32(), inputs[2].buf.i32());
        let (idx, weights) = (idx.i32(), weights.f32());
        match launch {
            Launch::Cpu(l) => hash_router(logits, token_ids, tid2eid, experts, k, SCALE, idx, weights, l, faults),
            Launch::Cuda(c) => hash_router_cuda(c, logits, token_ids, tid2eid, experts, k, SCALE, idx, weights, faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
