//! `hadamard`: the indexer's rotation, `y = H_n x * n^-0.5` per `n`-value segment (Sylvester-ordered Walsh-Hadamard).

mod cpu;
pub mod cuda;

pub use cpu::hadamard;
pub use cuda::hadamard_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct Hadamard;

impl Kernel for Hadamard {
    fn name(&self) -> &'static str {
        "hadamard"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 4e-6,
            rel: 2e-6,
            why: "log2(n) <= 9 f32 add stages each <= 2^-24 of a partial sum <= sum|x|, then one scale: |x| < 3.5, n <= 512",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, row_len, n) in [
            (1, 1, 1),
            (17, 2, 2),
            (5, 96, 32),
            (31, 128, 128),
            (3, 8192, 128),
            (4, 512, 512),
            (7, 64, 4),
        ] {
            cases.push(Case::new(rows, &[("row_len", row_len), ("n", n)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let row_len = case.get("row_len");
        let x: Vec<f32> = (0..case.rows * row_len).map(|_| rng.normal()).collect();
        vec![Arg::per_row("x", Buf::F32(x), row_len)]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("row_len"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let n = case.get("n");
        let scale = 1.0 / (n as f64).sqrt();
        // Sylvester's H_n: entry (i, j) is (-1)^popcount(i & j).
        let sign = |i: usize, j: usize| {
            if (i & j).count_ones().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            }
        };
        let mut y = Vec::with_capacity(inputs[0].buf.len());
        for seg in inputs[0].buf.f32().chunks(n) {
            for i in 0..n {
                y.push(scale * (0..n).map(|j| sign(i, j) * seg[j] as f64).sum::<f64>());
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
        &["skip_last_segment", "lost_scale", "stages_by_threads"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, n, y) = (inputs[0].buf.f32(), case.get("n"), out[0].f32());
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(x);
                hadamard(y, n, l, faults);
            }
            Launch::Cuda(c) => hadamard_cuda(c, x, n, y, faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
