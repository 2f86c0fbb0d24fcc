//! `dspark_markov`: DeepSeek V4.1 DSpark's Markov head, `logits_i += H_m E_m[prev_i]` (rank-256 bf16 embedding and head) on each draft row.

mod cpu;
mod cuda;

pub use cpu::dspark_markov;
pub use cuda::dspark_markov_cuda;

use tensorfold_formats::bf16;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct DsparkMarkov;

/// Little-endian bf16 bytes to f64, exactly.
fn bf16_at(bytes: &[u8], i: usize) -> f64 {
    f32::from_bits((u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]) as u32) << 16) as f64
}

impl Kernel for DsparkMarkov {
    fn name(&self) -> &'static str {
        "dspark_markov"
    }

    fn family(&self) -> &'static str {
        "dsv41"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 2e-6,
            rel: 1e-6,
            why: "bf16 products are exact in f32; sums at most rank / 16 + 5 deep over sum |p| < 1 here (< 1.5e-6), then one add",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, vocab, rank) in [
            (1, 1, 1),
            (17, 257, 256),
            (5, 1031, 31),
            (31, 17, 33),
            (2, 129_280, 16),
            (5, 4099, 256),
        ] {
            cases.push(Case::new(rows, &[("vocab", vocab), ("rank", rank)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (vocab, rank) = (case.get("vocab"), case.get("rank"));
        let table = |rng: &mut Rng| -> Vec<u8> {
            (0..vocab * rank)
                .flat_map(|_| bf16::f32_to_bf16(0.06 * rng.normal()).to_le_bytes())
                .collect()
        };
        let (embed, head) = (table(rng), table(rng));
        let logits: Vec<f32> = (0..case.rows * vocab).map(|_| 3.0 * rng.normal()).collect();
        // The first and last token ids always appear as the previous token, so an off-by-one cannot hide.
        let prev: Vec<i32> = (0..case.rows)
            .map(|r| match r {
                0 => vocab - 1,
                1 => 0,
                _ => rng.below(vocab as u64) as usize,
            } as i32)
            .collect();
        vec![
            Arg::per_row("logits", Buf::F32(logits), vocab),
            Arg::per_row("prev", Buf::I32(prev), 1),
            Arg::shared("markov_embed", Buf::U8(embed)),
            Arg::shared("markov_head", Buf::U8(head)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "logits",
            kind: OutKind::F32,
            row_len: case.get("vocab"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (vocab, rank) = (case.get("vocab"), case.get("rank"));
        let (logits, prev) = (inputs[0].buf.f32(), inputs[1].buf.i32());
        let (embed, head) = (inputs[2].buf.u8(), inputs[3].buf.u8());
        let mut y = Vec::with_capacity(logits.len());
        for (r, &t) in prev.iter().enumerate() {
            let t = t as usize;
            for v in 0..vocab {
                let m: f64 = (0..rank)
                    .map(|k| bf16_at(head, v * rank + k) * bf16_at(embed, t * rank + k))
                    .sum();
                y.push(logits[r * vocab + v] as f64 + m);
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
        &["prev_off_by_one", "drop_last_rank", "skip_last_vocab"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let rank = case.get("rank");
        let (prev, embed, head) = (inputs[1].buf.i32(), inputs[2].buf.u8(), inputs[3].buf.u8());
        let y = out[0].f32();
        y.copy_from_slice(inputs[0].buf.f32());
        match launch {
            Launch::Cpu(l) => dspark_markov(embed, head, rank, prev, y, l, faults),
            Launch::Cuda(c) => {
                dspark_markov_cuda(c, embed, head, rank, prev, y, faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
