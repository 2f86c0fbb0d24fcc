//! `dequant_gemm`: FP8-block or MXFP4 weights decoded exactly, f32 activations, optional output groups (transformers' semantics).

mod cpu;
pub mod cuda;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use cpu::{WeightFormat, dequant_gemm};
pub use cuda::dequant_gemm_cuda;

use tensorfold_formats::{e2m1, e4m3, e8m0};

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct DequantGemm;

fn format(case: &Case) -> WeightFormat {
    if case.get("fp4") == 1 {
        WeightFormat::Mxfp4
    } else {
        WeightFormat::Fp8Block
    }
}

impl Kernel for DequantGemm {
    fn name(&self) -> &'static str {
        "dequant_gemm"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-5,
            abs: 1e-3,
            rel: 1e-5,
            why: "exact weight decode, f32 products in a 16-lane f32 sum: about sqrt(k/16) ulp of sum |x w| (<= 500 here)",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, n, k, groups, fp4) in [
            (1, 1, 1, 1, 0),
            (17, 31, 257, 1, 0),
            (5, 130, 300, 1, 0),
            (3, 256, 512, 2, 0),
            (7, 33, 64, 1, 1),
            (4, 256, 1024, 1, 1),
            (20, 64, 512, 2, 0),
            (18, 33, 64, 1, 1),
            (2, 64, 4608, 2, 0),
        ] {
            cases.push(Case::new(rows, &[("n", n), ("k", k), ("groups", groups), ("fp4", fp4)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (n, k, groups) = (case.get("n"), case.get("k"), case.get("groups"));
        let x: Vec<f32> = (0..case.rows * k * groups).map(|_| rng.normal()).collect();
        let (w, scales) = match format(case) {
            WeightFormat::Fp8Block => {
                let w: Vec<u8> = (0..n * k).map(|_| (rng.below(256) as u8) & 0xF7 | 0x30).collect();
                (
                    w,
                    (0..n.div_ceil(128) * k.div_ceil(128))
                        .map(|_| 120 + rng.below(8) as u8)
                        .collect(),
                )
            }
            WeightFormat::Mxfp4 => {
                let w: Vec<u8> = (0..n * k / 2).map(|_| rng.below(256) as u8).collect();
                (w, (0..n * k / 32).map(|_| 122 + rng.below(6) as u8).collect())
            }
        };
        vec![
            Arg::per_row("x", Buf::F32(x), k * groups),
            Arg::shared("w", Buf::U8(w)),
            Arg::shared("scales", Buf::U8(scales)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("n"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (n, k, groups) = (case.get("n"), case.get("k"), case.get("groups"));
        let (x, w, s) = (inputs[0].buf.f32(), inputs[1].buf.u8(), inputs[2].buf.u8());
        let weight = |i: usize, j: usize| -> f64 {
            match format(case) {
                WeightFormat::Fp8Block => {
                    e4m3::decode(w[i * k + j]) as f64 * e8m0::decode(s[i / 128 * k.div_ceil(128) + j / 128]) as f64
                }
                WeightFormat::Mxfp4 => {
                    let b = w[(i * k + j) / 2];
                    let code = if j.is_multiple_of(2) { b & 0xF } else { b >> 4 };
                    e2m1::decode(code) as f64 * e8m0::decode(s[i * (k / 32) + j / 32]) as f64
                }
            }
        };
        let mut y = Vec::with_capacity(case.rows * n);
        for r in 0..case.rows {
            for i in 0..n {
                let g = i / (n / groups);
                y.push((0..k).map(|j| x[(r * groups + g) * k + j] as f64 * weight(i, j)).sum());
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
        &["skip_last_row", "lost_scale", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (n, k, groups) = (case.get("n"), case.get("k"), case.get("groups"));
        let (x, w, s) = (inputs[0].buf.f32(), inputs[1].buf.u8(), inputs[2].buf.u8());
        match launch {
            Launch::Cpu(l) => dequant_gemm(x, w, s, format(case), n, k, groups, out[0].f32(), l, faults),
            Launch::Cuda(c) => dequant_gemm_cuda(c, x, w, s, format(case), n, k, groups, out[0].f32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
