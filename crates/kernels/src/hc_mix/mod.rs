//! `hc_mix`: mHC mixing logits `mix = (x . hc_fn^T) * rsqrt(mean(x^2) + eps)` over the flattened streams of a token row.

pub(crate) mod cpu;
pub mod cuda;

pub use cpu::hc_mix;
pub use cuda::hc_mix_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's rms_norm_eps.
const EPS: f32 = 1e-6;

pub struct HcMix;

impl Kernel for HcMix {
    fn name(&self) -> &'static str {
        "hc_mix"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 5e-6,
            abs: 2e-5,
            rel: 1e-5,
            why: "f32 16-lane dots of hc*D terms: ~sqrt(hc*D/16) roundings of sum|x w| * rsqrt, ~4e-6 at hc*D = 16384",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, hc, dim, mix) in [
            (1, 4, 1, 24),
            (17, 4, 17, 24),
            (5, 1, 31, 3),
            (31, 4, 257, 24),
            (3, 4, 4096, 24),
            (2, 4, 4099, 24),
        ] {
            cases.push(Case::new(rows, &[("hc", hc), ("dim", dim), ("mix", mix)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let hc_dim = case.get("hc") * case.get("dim");
        let x: Vec<f32> = (0..case.rows * hc_dim).map(|_| 3.0 * rng.normal()).collect();
        let hc_fn: Vec<f32> = (0..case.get("mix") * hc_dim).map(|_| 0.02 * rng.normal()).collect();
        vec![
            Arg::per_row("x", Buf::F32(x), hc_dim),
            Arg::shared("hc_fn", Buf::F32(hc_fn)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "mix",
            kind: OutKind::F32,
            row_len: case.get("mix"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let hc_dim = case.get("hc") * case.get("dim");
        let (x, hc_fn) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let mut mix = Vec::new();
        for row in x.chunks(hc_dim) {
            let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / hc_dim as f64;
            let r = 1.0 / (ms + EPS as f64).sqrt();
            for w in hc_fn.chunks(hc_dim) {
                mix.push(row.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * r);
            }
        }
        vec![mix]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "lost_rsqrt", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let hc_dim = case.get("hc") * case.get("dim");
        let (x, hc_fn) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        match launch {
            Launch::Cpu(l) => hc_mix(x, hc_fn, hc_dim, EPS, out[0].f32(), l, faults),
            Launch::Cuda(c) => {
                hc_mix_cuda(c, x, hc_fn, hc_dim, EPS, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
