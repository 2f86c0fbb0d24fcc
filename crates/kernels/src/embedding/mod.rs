//! `embedding`: token ids to f32 rows of the bf16 `embed.weight` table, exactly.

mod cpu;
pub mod cuda;

pub use cpu::embedding;
pub use cuda::embedding_cuda;

use tensorfold_formats::bf16;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct Embedding;

impl Kernel for Embedding {
    fn name(&self) -> &'static str {
        "embedding"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "every bf16 is an f32: a gather and an exact widening",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, vocab, dim) in [
            (1, 1, 1),
            (17, 31, 257),
            (5, 129_280, 8),
            (9, 1031, 4096),
            (2, 257, 7168),
        ] {
            cases.push(Case::new(rows, &[("vocab", vocab), ("dim", dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (vocab, dim) = (case.get("vocab"), case.get("dim"));
        let table: Vec<u8> = (0..vocab * dim)
            .flat_map(|_| bf16::f32_to_bf16(0.05 * rng.normal()).to_le_bytes())
            .collect();
        // First and last token ids always appear, so an off-by-one cannot hide.
        let ids: Vec<i32> = (0..case.rows)
            .map(|r| match r {
                0 => vocab - 1,
                1 => 0,
                _ => rng.below(vocab as u64) as usize,
            } as i32)
            .collect();
        vec![
            Arg::shared("table", Buf::U8(table)),
            Arg::per_row("ids", Buf::I32(ids), 1),
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
        let dim = case.get("dim");
        let (table, ids) = (inputs[0].buf.u8(), inputs[1].buf.i32());
        let mut y = Vec::with_capacity(ids.len() * dim);
        for &id in ids {
            for j in 0..dim {
                let at = 2 * (id as usize * dim + j);
                // bf16 is the top half of an f32: value = sign, 8 exponent bits, 7 mantissa bits.
                let bits = table[at] as u32 | (table[at + 1] as u32) << 8;
                y.push(f32::from_bits(bits << 16) as f64);
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
        &["skip_last_row", "id_off_by_one", "byte_swap"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (table, dim, ids) = (inputs[0].buf.u8(), case.get("dim"), inputs[1].buf.i32());
        match launch {
            Launch::Cpu(l) => embedding(table, dim, ids, out[0].f32(), l, faults),
            Launch::Cuda(c) => {
                embedding_cuda(c, table, dim, ids, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
