//! `fp4_round_trip`: the indexer's FP4 simulation, `x = e2m1(clamp(x / s, ±6)) * s` with `s = 2^ceil(log2(amax / 6))` per 32.

mod cpu;
pub mod cuda;

pub use cpu::{FP4_BLOCK, fp4_round_trip};
pub use cuda::fp4_round_trip_cuda;

use crate::act_quant::{block_values, pow2_scale, round_to_grid};
use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// Largest e2m1 magnitude.
const QMAX: f64 = 6.0;
/// The e2m1 values of codes 0..8.
const GRID: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

pub struct Fp4RoundTrip;

impl Kernel for Fp4RoundTrip {
    fn name(&self) -> &'static str {
        "fp4_round_trip"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "exact: x / s and q * s are exact for power-of-two s, and RNE to the e2m1 grid is unique",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, dim) in [(1, 1), (17, 31), (5, 257), (31, 128), (3, 8192), (2, 4096)] {
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
                row.extend(block_values(rng, FP4_BLOCK, QMAX as f32, 4.0));
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
        let floor = QMAX * 2f64.powi(-126);
        let mut y: Vec<f64> = inputs[0].buf.f32().iter().map(|&v| v as f64).collect();
        for row in y.chunks_mut(dim) {
            for b in row.chunks_mut(FP4_BLOCK) {
                let amax = b.iter().fold(floor, |m, v| m.max(v.abs()));
                let s = pow2_scale(amax, QMAX);
                for v in b.iter_mut() {
                    *v = round_to_grid((*v / s).clamp(-QMAX, QMAX), &GRID) * s;
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
        &["drop_last_element", "block_plus_one", "block_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, y, dim) = (inputs[0].buf.f32(), out[0].f32(), case.get("dim"));
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(x);
                fp4_round_trip(y, dim, l, faults);
            }
            Launch::Cuda(c) => fp4_round_trip_cuda(c, x, dim, y, faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
