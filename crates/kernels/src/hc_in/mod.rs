//! `hc_in`: a sub-block's mHC in, fused: the mixing logits, their Sinkhorn split, the collapse `pre . X` and its norm with act_quant.

mod cpu;
pub mod cuda;

pub use cpu::{HcInRows, hc_in};
pub use cuda::{HcInOut, HcInWeights, MAX_DIM, MAX_HC, hc_in_cuda};

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;
use crate::hc_mix::mix_reference;
use crate::hc_split_sinkhorn::split_reference;
use crate::rms_norm::norm_reference;
use crate::rms_norm_quant::{BLOCK, dequantised, round_trip_reference};

/// The model's rms_norm_eps and hc_eps.
const EPS: f32 = 1e-6;

pub struct HcIn;

impl Kernel for HcIn {
    fn name(&self) -> &'static str {
        "hc_in"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-5,
            abs: 2e-5,
            rel: 2e-5,
            why: "hc_mix's logit error (<= 2e-5) through a sigmoid's slope (<= 1/4) times a scale (<= 1.5), and a softmax and Sinkhorn passes",
        }
    }

    fn output_bound(&self, name: &str) -> Bound {
        match name {
            "y" => Bound {
                rel_norm: 2e-5,
                abs: 1e-4,
                rel: 1e-4,
                why: "pre's error (<= 1e-5) times the streams (|x| <= ~15 over the norm's ~5 rms), then rms_norm's few ulp",
            },
            "yq" => Bound {
                rel_norm: 0.04,
                abs: 1e-4,
                rel: 0.0626,
                why: "half an e4m3 step (2^-4 relative) where y's error moves a value across a rounding boundary",
            },
            _ => self.bound(),
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, hc, dim, iters) in [
            (1, 4, 4096, 20),
            (3, 4, 4096, 20),
            (17, 4, 257, 20),
            (2, 4, 4099, 20),
            (31, 4, 128, 1),
            (5, 2, 31, 3),
            (7, 1, 33, 20),
        ] {
            cases.push(Case::new(rows, &[("hc", hc), ("dim", dim), ("iters", iters)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let width = (2 + hc) * hc;
        let normal = |rng: &mut Rng, n: usize, s: f32| (0..n).map(|_| s * rng.normal()).collect::<Vec<f32>>();
        let x = normal(rng, case.rows * hc * dim, 3.0);
        let hc_fn = normal(rng, width * hc * dim, 2.0 / ((hc * dim) as f32).sqrt());
        let scale: Vec<f32> = (0..3).map(|_| 0.5 + rng.uniform() as f32).collect();
        let base = normal(rng, width, 0.5);
        let norm: Vec<f32> = (0..dim).map(|_| 1.0 + 0.1 * rng.normal()).collect();
        vec![
            Arg::per_row("x", Buf::F32(x), hc * dim),
            Arg::shared("hc_fn", Buf::F32(hc_fn)),
            Arg::shared("scale", Buf::F32(scale)),
            Arg::shared("base", Buf::F32(base)),
            Arg::shared("norm", Buf::F32(norm)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let out = |name, row_len| OutSpec {
            name,
            kind: OutKind::F32,
            row_len,
        };
        vec![
            out("pre", hc),
            out("post", hc),
            out("comb", hc * hc),
            out("y", dim),
            out("yq", dim),
        ]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (hc, dim, iters) = (case.get("hc"), case.get("dim"), case.get("iters"));
        let x = inputs[0].buf.f32();
        let mix = mix_reference(x, inputs[1].buf.f32(), hc * dim, EPS);
        let f64s = |a: &Arg| a.buf.f32().iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let [pre, post, comb] = split_reference(&mix, &f64s(&inputs[2]), &f64s(&inputs[3]), hc, iters, EPS);
        let collapsed: Vec<f64> = (0..case.rows * dim)
            .map(|i| {
                let (r, d) = (i / dim, i % dim);
                (0..hc)
                    .map(|s| pre[r * hc + s] * x[(r * hc + s) * dim + d] as f64)
                    .sum()
            })
            .collect();
        let y = norm_reference(&collapsed, inputs[4].buf.f32(), dim, EPS);
        let yq = round_trip_reference(&y, dim);
        vec![pre, post, comb, y, yq]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "lost_rsqrt", "lost_act_scale"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let [pre, post, comb, y, yq] = out else {
            panic!("hc_in has five outputs")
        };
        let (hc, dim, iters) = (case.get("hc"), case.get("dim"), case.get("iters"));
        let x = inputs[0].buf.f32();
        let [hc_fn, scale, base, norm] = [1, 2, 3, 4].map(|i| inputs[i].buf.f32());
        match launch {
            Launch::Cpu(l) => {
                let rows = HcInRows {
                    pre: pre.f32(),
                    post: post.f32(),
                    comb: comb.f32(),
                    y: y.f32(),
                    yq: yq.f32(),
                };
                hc_in(x, [hc_fn, scale, base, norm], hc, iters, [EPS, EPS], rows, l, faults)
            }
            Launch::Cuda(c) => {
                let rows = case.rows;
                // Codes poisoned as f16 NaN and scales as NaN, so a code or scale never written shows in yq.
                let mut q = vec![0x7e00u16; rows * dim.next_multiple_of(8)];
                let mut scales = vec![f32::NAN; rows * dim.div_ceil(BLOCK)];
                let (mut mix, mut collapsed) = (vec![f32::NAN; rows * (2 + hc) * hc], vec![f32::NAN; rows * dim]);
                let w = HcInWeights {
                    hc_fn: hc_fn.into(),
                    scale: scale.into(),
                    base: base.into(),
                    norm: norm.into(),
                };
                let o = HcInOut {
                    mix: (&mut mix).into(),
                    pre: pre.f32().into(),
                    post: post.f32().into(),
                    comb: comb.f32().into(),
                    y: (&mut collapsed).into(),
                    yn: y.f32().into(),
                    q: (&mut q).into(),
                    scales: (&mut scales).into(),
                };
                hc_in_cuda(c, x, w, hc, iters, EPS, EPS, o, faults).unwrap_or_else(|e| panic!("{e}"));
                yq.f32().copy_from_slice(&dequantised(&q, &scales, dim));
            }
        }
    }
}
