//! `logits_argmax`: each logit row's greedy pick, the sampler's rule, so a greedy round reads back one id a row instead of its logits.

mod cpu;
pub mod cuda;

pub use cpu::{logits_argmax, pick};
pub use cuda::logits_argmax_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct LogitsArgmax;

impl Kernel for LogitsArgmax {
    fn name(&self) -> &'static str {
        "logits_argmax"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "integer ids from comparisons only: exact",
        }
    }

    fn cases(&self) -> Vec<Case> {
        // (rows, vocab): one logit, a vocab under a warp, awkward widths (4100: whole 16-byte pieces), V4's vocab; logits from few values (ties), NaNs and signed zeros.
        [(1, 1), (3, 7), (17, 1000), (9, 4099), (5, 4100), (4, 129_280)]
            .into_iter()
            .map(|(rows, vocab)| Case::new(rows, &[("vocab", vocab)]))
            .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let vocab = case.get("vocab");
        let mut x = Vec::with_capacity(case.rows * vocab);
        for r in 0..case.rows {
            for _ in 0..vocab {
                // Few values, zero of both signs among them, so the largest is often tied; of every five rows the fourth has NaNs and the fifth is all NaN.
                let v = match r % 5 {
                    4 => f32::NAN,
                    3 if rng.below(8) == 0 => f32::NAN,
                    _ => (rng.normal() * 3.0).round(),
                };
                x.push(if v == 0.0 && rng.below(2) == 0 { -0.0 } else { v });
            }
        }
        vec![Arg::per_row("logits", Buf::F32(x), vocab)]
    }

    fn outputs(&self, _case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "id",
            kind: OutKind::F32,
            row_len: 1,
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let vocab = case.get("vocab");
        let ids = inputs[0].buf.f32().chunks(vocab).map(|row| {
            let numbers = row.iter().enumerate().filter(|(_, v)| !v.is_nan());
            // The largest number's first id (max_by keeps the last of equals, so ids compare reversed), else the last id.
            numbers
                .max_by(|(i, a), (j, b)| a.partial_cmp(b).expect("numbers").then(j.cmp(i)))
                .map_or(row.len() - 1, |(i, _)| i) as f64
        });
        vec![ids.collect()]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["ties_to_last", "nan_wins"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, vocab, y) = (inputs[0].buf.f32(), case.get("vocab"), out[0].f32());
        match launch {
            Launch::Cpu(l) => logits_argmax(x, vocab, y, l, faults),
            Launch::Cuda(c) => logits_argmax_cuda(c, x, vocab, y, faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
