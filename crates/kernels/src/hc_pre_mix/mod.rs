//! `hc_pre_mix`: `hc_pre` with its `pre` gates made from the row's mix (`hc_split_sinkhorn`'s expression), so the collapse need not wait for the Sinkhorn passes.

mod cpu;
pub mod cuda;

pub use cpu::hc_pre_mix;
pub use cuda::hc_pre_mix_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's hc_eps.
const EPS: f32 = 1e-6;

pub struct HcPreMix;

impl Kernel for HcPreMix {
    fn name(&self) -> &'static str {
        "hc_pre_mix"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 1e-5,
            rel: 2e-6,
            why: "an FMA-polynomial sigmoid (~2 ulp) a gate, then an hc-term FMA chain rounding half an ulp a term",
        }
    }

    fn cases(&self) -> Vec<Case> {
        [
            (1, 4, 1),
            (17, 4, 17),
            (31, 4, 257),
            (3, 4, 4096),
            (2, 4, 4099),
            (7, 1, 33),
            (4, 3, 65),
            (5, 7, 300),
        ]
        .into_iter()
        .map(|(rows, hc, dim)| Case::new(rows, &[("hc", hc), ("dim", dim)]))
        .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let width = (2 + hc) * hc;
        let x: Vec<f32> = (0..case.rows * hc * dim).map(|_| 3.0 * rng.normal()).collect();
        let mix: Vec<f32> = (0..case.rows * width).map(|_| 2.5 * rng.normal()).collect();
        let scale: Vec<f32> = (0..3).map(|_| 0.5 + rng.uniform() as f32).collect();
        let base: Vec<f32> = (0..width).map(|_| 0.5 * rng.normal()).collect();
        vec![
            Arg::per_row("x", Buf::F32(x), hc * dim),
            Arg::per_row("mix", Buf::F32(mix), width),
            Arg::shared("scale", Buf::F32(scale)),
            Arg::shared("base", Buf::F32(base)),
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
        let width = (2 + hc) * hc;
        let (x, mix) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let (scale, base) = (inputs[2].buf.f32(), inputs[3].buf.f32());
        let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
        let mut y = Vec::new();
        for r in 0..case.rows {
            let pre: Vec<f64> = (0..hc)
                .map(|j| sigmoid(mix[r * width + j] as f64 * scale[0] as f64 + base[j] as f64) + EPS as f64)
                .collect();
            for d in 0..dim {
                y.push((0..hc).map(|i| pre[i] * x[(r * hc + i) * dim + d] as f64).sum());
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
        &["skip_last_row", "drop_last_stream", "lost_pre_scale"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let (x, mix) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let (scale, base) = (inputs[2].buf.f32(), inputs[3].buf.f32());
        match launch {
            Launch::Cpu(l) => hc_pre_mix(x, mix, scale, base, hc, dim, EPS, out[0].f32(), l, faults),
            Launch::Cuda(c) => hc_pre_mix_cuda(c, x, mix, scale, base, hc, dim, EPS, out[0].f32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
