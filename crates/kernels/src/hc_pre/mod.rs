//! `hc_pre`: collapses a token row's hc residual streams into the block input, `y = sum_i pre_i * X_i` (also V4.1's lagged collapse, `pre` the previous sublayer's pre-mix).

pub(crate) mod cpu;
pub mod cuda;

pub use cpu::hc_pre;
pub use cuda::hc_pre_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct HcPre;

impl Kernel for HcPre {
    fn name(&self) -> &'static str {
        "hc_pre"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn also_in(&self) -> &'static [&'static str] {
        &["dsv41"]
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 5e-6,
            rel: 1e-6,
            why: "an hc-term FMA chain: hc roundings of half an ulp of partial sums below 32 here (<= 1e-6 each)",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, hc, dim) in [
            (1, 4, 1),
            (17, 4, 17),
            (5, 4, 31),
            (31, 4, 257),
            (3, 4, 4096),
            (2, 4, 4099),
            (7, 1, 33),
            (4, 3, 65),
        ] {
            cases.push(Case::new(rows, &[("hc", hc), ("dim", dim)]));
        }
        // DeepSeek V4.1's lagged collapse (hidden 5120): even rows carry layer 0's one-hot pre-mix.
        for (rows, dim) in [(6, 5120), (17, 33)] {
            cases.push(Case::new(rows, &[("hc", 4), ("dim", dim), ("one_hot_even_rows", 1)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let x: Vec<f32> = (0..case.rows * hc * dim).map(|_| 3.0 * rng.normal()).collect();
        let one_hot = case.params.contains(&("one_hot_even_rows", 1));
        let pre: Vec<f32> = (0..case.rows * hc)
            .map(|i| match (one_hot && (i / hc) % 2 == 0, i % hc) {
                (true, 0) => 1.0,
                (true, _) => 0.0,
                _ => rng.uniform() as f32 + 1e-6,
            })
            .collect();
        vec![
            Arg::per_row("x", Buf::F32(x), hc * dim),
            Arg::per_row("pre", Buf::F32(pre), hc),
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
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let (x, pre) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let mut y = Vec::new();
        for r in 0..case.rows {
            for d in 0..dim {
                y.push(
                    (0..hc)
                        .map(|i| pre[r * hc + i] as f64 * x[(r * hc + i) * dim + d] as f64)
                        .sum(),
                );
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
        &["skip_last_row", "drop_last_stream", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let (x, pre) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        match launch {
            Launch::Cpu(l) => hc_pre(x, pre, hc, dim, out[0].f32(), l, faults),
            Launch::Cuda(c) => hc_pre_cuda(c, x, pre, hc, dim, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
