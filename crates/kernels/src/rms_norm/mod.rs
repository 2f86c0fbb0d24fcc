//! `rms_norm`: `y = x / sqrt(mean(x^2) + eps) * w` per token row (attn_norm, ffn_norm, q_norm, kv_norm, ...).

mod cpu;
pub mod cuda;

pub use cpu::rms_norm;
pub use cuda::rms_norm_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's epsilon.
const EPS: f32 = 1e-6;

pub struct RmsNorm;

impl Kernel for RmsNorm {
    fn name(&self) -> &'static str {
        "rms_norm"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 1e-6,
            rel: 4e-6,
            why: "f32 sum of squares in 16 lanes, one sqrt, one divide and two multiplies: a few ulp at 2^-24",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, dim) in [(1, 1), (17, 31), (5, 257), (31, 128), (3, 4096), (2, 7168)] {
            cases.push(Case::new(rows, &[("dim", dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let dim = case.get("dim");
        let x: Vec<f32> = (0..case.rows * dim).map(|_| 3.0 * rng.normal()).collect();
        let w: Vec<f32> = (0..dim).map(|_| 1.0 + 0.1 * rng.normal()).collect();
        vec![Arg::per_row("x", Buf::F32(x), dim), Arg::shared("weight", Buf::F32(w))]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let dim = case.get("dim");
        let (x, w) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(dim) {
            let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / dim as f64;
            let r = 1.0 / (ms + EPS as f64).sqrt();
            y.extend(row.iter().zip(w).map(|(&v, &g)| v as f64 * r * g as f64));
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
        &["skip_last_row", "drop_last_element", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let _ = case;
        let (x, w) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        match launch {
            Launch::Cpu(l) => rms_norm(x, w, EPS, out[0].f32(), l, faults),
            Launch::Cuda(c) => rms_norm_cuda(c, x, w, EPS, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
