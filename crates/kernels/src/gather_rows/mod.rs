//! `gather_rows`: f32 rows picked by index (the routed experts' rows in expert order, and their outputs back in slot order), exactly.

mod cpu;
pub mod cuda;

pub use cpu::gather_rows;
pub use cuda::gather_rows_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct GatherRows;

impl Kernel for GatherRows {
    fn name(&self) -> &'static str {
        "gather_rows"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "a copy: every value moves unchanged",
        }
    }

    fn cases(&self) -> Vec<Case> {
        // (rows, source rows, dim): odd widths take the scalar path, multiples of 4 the vector one; V4-Flash's 4096 with six slots a token.
        [(1, 1, 1), (17, 31, 257), (9, 3, 7), (300, 50, 4096), (2, 257, 7168)]
            .into_iter()
            .map(|(rows, src, dim)| Case::new(rows, &[("src", src), ("dim", dim)]))
            .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (src, dim) = (case.get("src"), case.get("dim"));
        let x: Vec<f32> = (0..src * dim).map(|_| rng.normal()).collect();
        // The last and first source rows always appear, so an off-by-one cannot hide; the rest repeat at random.
        let idx: Vec<i32> = (0..case.rows)
            .map(|r| match r {
                0 => src - 1,
                1 => 0,
                _ => rng.below(src as u64) as usize,
            } as i32)
            .collect();
        vec![Arg::shared("x", Buf::F32(x)), Arg::per_row("idx", Buf::I32(idx), 1)]
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
        let (x, idx) = (inputs[0].buf.f32(), inputs[1].buf.i32());
        let y = idx
            .iter()
            .flat_map(|&i| x[i as usize * dim..(i as usize + 1) * dim].iter().map(|&v| v as f64))
            .collect();
        vec![y]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "id_off_by_one"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, dim, idx) = (inputs[0].buf.f32(), case.get("dim"), inputs[1].buf.i32());
        match launch {
            Launch::Cpu(l) => gather_rows(x, dim, idx, out[0].f32(), l, faults),
            Launch::Cuda(c) => gather_rows_cuda(c, x, dim, idx, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
