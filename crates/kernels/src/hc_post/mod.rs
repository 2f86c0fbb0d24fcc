//! `hc_post`: expands a block output back into hc residual streams, `X'_j = post_j * f + sum_i comb[i, j] * X_i`.

mod cpu;
pub mod cuda;

pub use cpu::hc_post;
pub use cuda::hc_post_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct HcPost;

impl Kernel for HcPost {
    fn name(&self) -> &'static str {
        "hc_post"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 4e-6,
            rel: 1e-6,
            why: "an (hc+1)-term FMA chain: hc+1 roundings of half an ulp of partial sums below 16 here (<= 5e-7 each)",
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
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let f: Vec<f32> = (0..case.rows * dim).map(|_| rng.normal()).collect();
        let x: Vec<f32> = (0..case.rows * hc * dim).map(|_| 3.0 * rng.normal()).collect();
        let post: Vec<f32> = (0..case.rows * hc).map(|_| 2.0 * rng.uniform() as f32).collect();
        // Roughly doubly stochastic: uniform weights around 1/hc.
        let comb: Vec<f32> = (0..case.rows * hc * hc)
            .map(|_| (0.5 + rng.uniform() as f32) / hc as f32)
            .collect();
        vec![
            Arg::per_row("f", Buf::F32(f), dim),
            Arg::per_row("x", Buf::F32(x), hc * dim),
            Arg::per_row("post", Buf::F32(post), hc),
            Arg::per_row("comb", Buf::F32(comb), hc * hc),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "x_out",
            kind: OutKind::F32,
            row_len: case.get("hc") * case.get("dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let v = |a: usize, i: usize| inputs[a].buf.f32()[i] as f64;
        let mut y = Vec::new();
        for r in 0..case.rows {
            for j in 0..hc {
                for d in 0..dim {
                    let mixed: f64 = (0..hc)
                        .map(|i| v(3, (r * hc + i) * hc + j) * v(1, (r * hc + i) * dim + d))
                        .sum();
                    y.push(v(2, r * hc + j) * v(0, r * dim + d) + mixed);
                }
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
        &["skip_last_row", "comb_not_transposed", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let arg = |i: usize| inputs[i].buf.f32();
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        match launch {
            Launch::Cpu(l) => hc_post(arg(0), arg(1), arg(2), arg(3), hc, dim, out[0].f32(), l, faults),
            Launch::Cuda(c) => hc_post_cuda(c, arg(0), arg(1), arg(2), arg(3), hc, dim, out[0].f32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
