//! `hc_split_sinkhorn`: mHC `pre`/`post` gates and the Sinkhorn-projected (doubly stochastic) `comb` from a row's mix.

mod cpu;
pub mod cuda;

pub use cpu::{MAX_HC, hc_split_sinkhorn};
pub use cuda::hc_split_sinkhorn_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's hc_eps.
const EPS: f32 = 1e-6;

pub struct HcSplitSinkhorn;

impl Kernel for HcSplitSinkhorn {
    fn name(&self) -> &'static str {
        "hc_split_sinkhorn"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-5,
            abs: 1e-6,
            rel: 1e-5,
            why: "FMA-polynomial exp/sigmoid (~2 ulp) then 2*iters normalising passes of hc-term sums and divides, each a few ulp",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, hc, iters) in [
            (1, 4, 20),
            (17, 4, 20),
            (31, 4, 1),
            (6, 4, 2),
            (257, 4, 20),
            (7, 2, 20),
            (3, 1, 20),
            (5, 7, 20),
            (40, 8, 20),
        ] {
            cases.push(Case::new(rows, &[("hc", hc), ("iters", iters)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let hc = case.get("hc");
        let width = (2 + hc) * hc;
        let mix: Vec<f32> = (0..case.rows * width).map(|_| 2.5 * rng.normal()).collect();
        let scale: Vec<f32> = (0..3).map(|_| 0.5 + rng.uniform() as f32).collect();
        let base: Vec<f32> = (0..width).map(|_| 0.5 * rng.normal()).collect();
        vec![
            Arg::per_row("mix", Buf::F32(mix), width),
            Arg::shared("scale", Buf::F32(scale)),
            Arg::shared("base", Buf::F32(base)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        let hc = case.get("hc");
        let out = |name, row_len| OutSpec {
            name,
            kind: OutKind::F32,
            row_len,
        };
        vec![out("pre", hc), out("post", hc), out("comb", hc * hc)]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (hc, iters) = (case.get("hc"), case.get("iters"));
        let width = (2 + hc) * hc;
        let f64s = |a: &Arg| a.buf.f32().iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let (mix, scale, base) = (f64s(&inputs[0]), f64s(&inputs[1]), f64s(&inputs[2]));
        let eps = EPS as f64;
        let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
        let (mut pre, mut post, mut comb) = (Vec::new(), Vec::new(), Vec::new());
        for m in mix.chunks(width) {
            pre.extend((0..hc).map(|j| sigmoid(m[j] * scale[0] + base[j]) + eps));
            post.extend((0..hc).map(|j| 2.0 * sigmoid(m[hc + j] * scale[1] + base[hc + j])));
            // c[i][j]: row i, column j, as mix[2hc + i*hc + j].
            let mut c: Vec<Vec<f64>> = (0..hc)
                .map(|i| {
                    (0..hc)
                        .map(|j| m[2 * hc + i * hc + j] * scale[2] + base[2 * hc + i * hc + j])
                        .collect()
                })
                .collect();
            for row in c.iter_mut() {
                let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
                for v in row.iter_mut() {
                    *v = (*v - max).exp() / sum + eps;
                }
            }
            let cols = |c: &mut Vec<Vec<f64>>| {
                for j in 0..hc {
                    let s: f64 = (0..hc).map(|i| c[i][j]).sum::<f64>() + eps;
                    for row in c.iter_mut() {
                        row[j] /= s;
                    }
                }
            };
            cols(&mut c);
            for _ in 1..iters {
                for row in c.iter_mut() {
                    let s: f64 = row.iter().sum::<f64>() + eps;
                    row.iter_mut().for_each(|v| *v /= s);
                }
                cols(&mut c);
            }
            comb.extend(c.into_iter().flatten());
        }
        vec![pre, post, comb]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "lost_comb_scale", "transposed_comb"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let [pre, post, comb] = out else {
            panic!("hc_split_sinkhorn has three outputs")
        };
        let (mix, scale, base) = (inputs[0].buf.f32(), inputs[1].buf.f32(), inputs[2].buf.f32());
        let (hc, iters) = (case.get("hc"), case.get("iters"));
        let (pre, post, comb) = (pre.f32(), post.f32(), comb.f32());
        match launch {
            Launch::Cpu(l) => hc_split_sinkhorn(mix, scale, base, hc, iters, EPS, pre, post, comb, l, faults),
            Launch::Cuda(c) => hc_split_sinkhorn_cuda(c, mix, scale, base, hc, iters, EPS, pre, post, comb, faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
