//! `moe_join`: a token row's MoE output, the sum of its k weighted routed expert outputs and then the shared expert's.

mod cpu;
pub mod cuda;

pub use cpu::moe_join;
pub use cuda::moe_join_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct MoeJoin;

impl Kernel for MoeJoin {
    fn name(&self) -> &'static str {
        "moe_join"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 2e-6,
            rel: 1e-6,
            why: "k f32 adds: k roundings of half an ulp of partial sums below 8 here (<= 2.4e-7 each)",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, k, dim) in [
            (1, 6, 1),
            (17, 6, 17),
            (5, 2, 31),
            (31, 6, 257),
            (3, 6, 4096),
            (2, 6, 4099),
            (9, 1, 33),
            (4, 8, 65),
        ] {
            cases.push(Case::new(rows, &[("k", k), ("dim", dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (k, dim) = (case.get("k"), case.get("dim"));
        let routed: Vec<f32> = (0..case.rows * k * dim).map(|_| 0.3 * rng.normal()).collect();
        let shared: Vec<f32> = (0..case.rows * dim).map(|_| rng.normal()).collect();
        vec![
            Arg::per_row("routed", Buf::F32(routed), k * dim),
            Arg::per_row("shared", Buf::F32(shared), dim),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (k, dim) = (case.get("k"), case.get("dim"));
        let (routed, shared) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let mut y = Vec::new();
        for r in 0..case.rows {
            for d in 0..dim {
                let experts: f64 = (0..k).map(|j| routed[(r * k + j) * dim + d] as f64).sum();
                y.push(experts + shared[r * dim + d] as f64);
            }
        }
        vec![y]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "drop_last_slot", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (k, dim) = (case.get("k"), case.get("dim"));
        let (routed, shared) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        match launch {
            Launch::Cpu(l) => moe_join(routed, shared, k, dim, out[0].f32(), l, faults),
            Launch::Cuda(c) => {
                moe_join_cuda(c, routed, shared, k, dim, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
