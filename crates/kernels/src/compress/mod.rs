//! `compress`: gated pooling of one compressed KV entry from its window's tokens (CSA ratio 4 overlapping, HCA ratio 128).

mod cpu;
pub mod cuda;

pub use cpu::{CompressShape, compress};
pub use cuda::compress_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct Compress;

fn shape(case: &Case) -> CompressShape {
    CompressShape {
        ratio: case.get("ratio"),
        head_dim: case.get("head_dim"),
        overlap: case.get("overlap") == 1,
    }
}

/// Table row of token `t`: tokens sit scattered in the table, as in a paged cache.
fn table_row(t: usize, num_tokens: usize) -> usize {
    (t * 7 + 3) % num_tokens
}

impl Kernel for Compress {
    fn name(&self) -> &'static str {
        "compress"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn also_in(&self) -> &'static [&'static str] {
        &["dsv41"]
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 2e-6,
            rel: 1e-6,
            why: "f32 softmax over <= 256 slots: one add, exp within 2 ulp, a sequential sum and one divide per weight, an FMA chain: a few ulp of sum p|kv|",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, ratio, head_dim, overlap, windows) in [
            (5, 4, 1, 1, 3),
            (17, 4, 31, 1, 11),
            (3, 5, 257, 0, 4),
            (9, 4, 128, 1, 13),
            (4, 4, 512, 1, 7),
            (3, 128, 17, 0, 3),
            (2, 128, 512, 0, 3),
            // DeepSeek V4.1's ratio-2 pair pooling (the model passes a zero ape).
            (5, 2, 512, 0, 9),
        ] {
            cases.push(Case::new(
                rows,
                &[
                    ("ratio", ratio),
                    ("head_dim", head_dim),
                    ("overlap", overlap),
                    ("windows", windows),
                ],
            ));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let sh = shape(case);
        let (width, slots) = (sh.width(), sh.slots());
        let num_tokens = case.get("windows") * sh.ratio;
        let kv: Vec<f32> = (0..num_tokens * width).map(|_| 2.0 * rng.normal()).collect();
        let gate: Vec<f32> = (0..num_tokens * width).map(|_| 3.0 * rng.normal()).collect();
        let ape: Vec<f32> = (0..sh.ratio * width).map(|_| 0.5 * rng.normal()).collect();
        let mut token_idx = Vec::with_capacity(case.rows * slots);
        for r in 0..case.rows {
            // Row 0 is entry 0, whose previous window does not exist; the rest are random entries.
            let w = if r == 0 {
                0
            } else {
                rng.below(case.get("windows") as u64) as usize
            };
            if sh.overlap {
                for i in 0..sh.ratio {
                    token_idx.push(if w == 0 {
                        -1
                    } else {
                        table_row((w - 1) * sh.ratio + i, num_tokens) as i32
                    });
                }
            }
            for i in 0..sh.ratio {
                token_idx.push(table_row(w * sh.ratio + i, num_tokens) as i32);
            }
        }
        vec![
            Arg::shared("kv", Buf::F32(kv)),
            Arg::shared("gate", Buf::F32(gate)),
            Arg::shared("ape", Buf::F32(ape)),
            Arg::per_row("token_idx", Buf::I32(token_idx), slots),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "entry",
            kind: OutKind::F32,
            row_len: case.get("head_dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (ratio, hd) = (case.get("ratio"), case.get("head_dim"));
        let overlap = case.get("overlap") == 1;
        let width = if overlap { 2 * hd } else { hd };
        let (kv, gate, ape) = (inputs[0].buf.f32(), inputs[1].buf.f32(), inputs[2].buf.f32());
        let tokens = inputs[3].buf.i32();
        let slots = tokens.len() / case.rows;
        let mut y = Vec::with_capacity(case.rows * hd);
        for row in tokens.chunks(slots) {
            // (table row, position in its window, first dim) of every present token.
            let mut present = Vec::new();
            for (s, &t) in row.iter().enumerate() {
                if t >= 0 {
                    let prev_window = overlap && s < ratio;
                    let dim0 = if overlap && !prev_window { hd } else { 0 };
                    present.push((t as usize, s % ratio, dim0));
                }
            }
            for c in 0..hd {
                let logit =
                    |&(t, i, d): &(usize, usize, usize)| gate[t * width + d + c] as f64 + ape[i * width + d + c] as f64;
                let m = present.iter().map(logit).fold(f64::NEG_INFINITY, f64::max);
                let den: f64 = present.iter().map(|p| (logit(p) - m).exp()).sum();
                let v: f64 = present
                    .iter()
                    .map(|p| (logit(p) - m).exp() / den * kv[p.0 * width + p.2 + c] as f64)
                    .sum();
                y.push(v);
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
        &["unmasked_slot", "ape_same_half", "sum_order_by_threads"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (kv, gate, ape, tokens) = (
            inputs[0].buf.f32(),
            inputs[1].buf.f32(),
            inputs[2].buf.f32(),
            inputs[3].buf.i32(),
        );
        match launch {
            Launch::Cpu(l) => compress(kv, gate, ape, tokens, shape(case), out[0].f32(), l, faults),
            Launch::Cuda(c) => compress_cuda(c, kv, gate, ape, tokens, shape(case), out[0].f32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
