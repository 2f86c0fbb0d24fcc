//! `hc_head`: the final mHC collapse of a token row's hc streams before `norm` and `head` (also the MTP layer's).

mod cpu;
pub mod cuda;

pub use cpu::hc_head;
pub use cuda::hc_head_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's rms_norm_eps and hc_eps.
const NORM_EPS: f32 = 1e-6;
const HC_EPS: f32 = 1e-6;

pub struct HcHead;

impl Kernel for HcHead {
    fn name(&self) -> &'static str {
        "hc_head"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 5e-6,
            abs: 3e-5,
            rel: 1e-5,
            why: "hc_mix's dot error (~4e-6 at 4D = 16384) times scale * sigmoid' (< 0.4) times sum_i |X_i| (< 40 here)",
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
        let x: Vec<f32> = (0..case.rows * hc * dim).map(|_| 3.0 * rng.normal()).collect();
        let hc_fn: Vec<f32> = (0..hc * hc * dim).map(|_| 0.02 * rng.normal()).collect();
        let base: Vec<f32> = (0..hc).map(|_| 0.5 * rng.normal()).collect();
        let scale = vec![0.5 + rng.uniform() as f32];
        vec![
            Arg::per_row("x", Buf::F32(x), hc * dim),
            Arg::shared("hc_fn", Buf::F32(hc_fn)),
            Arg::shared("base", Buf::F32(base)),
            Arg::shared("scale", Buf::F32(scale)),
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
        let f64s = |a: &Arg| a.buf.f32().iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let (x, hc_fn, base, scale) = (
            f64s(&inputs[0]),
            f64s(&inputs[1]),
            f64s(&inputs[2]),
            f64s(&inputs[3])[0],
        );
        let mut y = Vec::new();
        for row in x.chunks(hc * dim) {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / (hc * dim) as f64;
            let r = 1.0 / (ms + NORM_EPS as f64).sqrt();
            let pre: Vec<f64> = hc_fn
                .chunks(hc * dim)
                .zip(&base)
                .map(|(w, b)| {
                    let mix = row.iter().zip(w).map(|(a, c)| a * c).sum::<f64>() * r;
                    1.0 / (1.0 + (-(mix * scale + b)).exp()) + HC_EPS as f64
                })
                .collect();
            y.extend((0..dim).map(|d| (0..hc).map(|i| pre[i] * row[i * dim + d]).sum::<f64>()));
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
        &["skip_last_row", "lost_rsqrt", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let arg = |i: usize| inputs[i].buf.f32();
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let (x, hc_fn, base, scale) = (arg(0), arg(1), arg(2), arg(3)[0]);
        match launch {
            Launch::Cpu(l) => hc_head(
                x,
                hc_fn,
                base,
                scale,
                hc,
                dim,
                NORM_EPS,
                HC_EPS,
                out[0].f32(),
                l,
                faults,
            ),
            Launch::Cuda(c) => hc_head_cuda(
                c,
                x,
                hc_fn,
                base,
                scale,
                hc,
                dim,
                NORM_EPS,
                HC_EPS,
                out[0].f32(),
                faults,
            )
            .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
