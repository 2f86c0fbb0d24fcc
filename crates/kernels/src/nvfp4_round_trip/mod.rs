//! `nvfp4_round_trip`: DeepSeek V4.1's compressed-KV FP4 simulation, `x = e2m1(clamp(x / s, ±6)) * s` with `s = e4m3(amax / 6)` per 16.

mod cpu;
mod cuda;

pub use cpu::{NVFP4_BLOCK, nvfp4_round_trip};
pub use cuda::nvfp4_round_trip_cuda;

use crate::act_quant::{block_values, round_to_grid};
use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// Largest e2m1 magnitude.
const QMAX: f64 = 6.0;
/// The e2m1 values of codes 0..8.
const GRID: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Every finite non-negative e4m3 value in code order (codes 0..=0x7E).
fn e4m3_grid() -> Vec<f64> {
    (0u8..=0x7E)
        .map(|c| tensorfold_formats::e4m3::decode(c) as f64)
        .collect()
}

pub struct Nvfp4RoundTrip;

impl Kernel for Nvfp4RoundTrip {
    fn name(&self) -> &'static str {
        "nvfp4_round_trip"
    }

    fn family(&self) -> &'static str {
        "dsv41"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "exact: both roundings are decided in f64, where f32 inputs never straddle a grid midpoint, and q * s fits f32",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, dim) in [(1, 1), (17, 31), (5, 257), (31, 128), (3, 512), (2, 4096)] {
            cases.push(Case::new(rows, &[("dim", dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let dim = case.get("dim");
        let mut x = Vec::with_capacity(case.rows * dim);
        for _ in 0..case.rows {
            let mut row = Vec::with_capacity(dim);
            while row.len() < dim {
                row.extend(block_values(rng, NVFP4_BLOCK, QMAX as f32, 4.0));
            }
            row.truncate(dim);
            x.extend(row);
        }
        vec![Arg::per_row("x", Buf::F32(x), dim)]
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
        let scales = e4m3_grid();
        let mut y: Vec<f64> = inputs[0].buf.f32().iter().map(|&v| v as f64).collect();
        for row in y.chunks_mut(dim) {
            for b in row.chunks_mut(NVFP4_BLOCK) {
                let amax = b.iter().fold(0f64, |m, v| m.max(v.abs()));
                let s = round_to_grid((amax / QMAX).min(448.0), &scales);
                for v in b.iter_mut() {
                    *v = if s == 0.0 {
                        0.0
                    } else {
                        round_to_grid((*v / s).clamp(-QMAX, QMAX), &GRID) * s
                    };
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
        &["drop_last_element", "block_32", "pow2_scale"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, y, dim) = (inputs[0].buf.f32(), out[0].f32(), case.get("dim"));
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(x);
                nvfp4_round_trip(y, dim, l, faults);
            }
            Launch::Cuda(c) => nvfp4_round_trip_cuda(c, x, dim, y, faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
