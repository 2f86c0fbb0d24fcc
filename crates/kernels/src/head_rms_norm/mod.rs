//! `head_rms_norm`: the query's unweighted per-head RMS norm, `q_h *= 1/sqrt(mean(q_h^2) + eps)` for each head of each row.

mod cpu;
pub mod cuda;

pub use cpu::head_rms_norm;
pub use cuda::head_rms_norm_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's epsilon.
const EPS: f32 = 1e-6;

pub struct HeadRmsNorm;

impl Kernel for HeadRmsNorm {
    fn name(&self) -> &'static str {
        "head_rms_norm"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 1e-6,
            rel: 4e-6,
            why: "f32 sum of squares in 16 lanes, one sqrt, one divide and one multiply: a few ulp at 2^-24",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, heads, head_dim) in [
            (1, 1, 1),
            (17, 1, 31),
            (5, 3, 257),
            (7, 2, 128),
            (3, 64, 512),
            (2, 128, 512),
        ] {
            cases.push(Case::new(rows, &[("heads", heads), ("head_dim", head_dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (heads, head_dim) = (case.get("heads"), case.get("head_dim"));
        // wq_b output: each head at its own scale, some near zero so eps matters.
        let scales = [1e-4, 0.05, 1.0, 4.0, 30.0];
        let mut q = Vec::with_capacity(case.rows * heads * head_dim);
        for _ in 0..case.rows * heads {
            let s = scales[rng.below(scales.len() as u64) as usize];
            q.extend((0..head_dim).map(|_| s * rng.normal()));
        }
        vec![Arg::per_row("q", Buf::F32(q), heads * head_dim)]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("heads") * case.get("head_dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let head_dim = case.get("head_dim");
        let mut y = Vec::new();
        for head in inputs[0].buf.f32().chunks(head_dim) {
            let ms = head.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / head_dim as f64;
            let r = 1.0 / (ms + EPS as f64).sqrt();
            y.extend(head.iter().map(|&v| v as f64 * r));
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
        &["skip_last_head", "drop_last_element", "order_by_threads"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (q, head_dim, y) = (inputs[0].buf.f32(), case.get("head_dim"), out[0].f32());
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(q);
                head_rms_norm(y, head_dim, EPS, l, faults);
            }
            Launch::Cuda(c) => head_rms_norm_cuda(c, q, head_dim, EPS, y, faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
