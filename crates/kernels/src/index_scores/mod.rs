//! `index_scores`: the lightning indexer's `I[t, s] = sum_h w[t, h] * ReLU(q[t, h] . k[s])` over a sequence's compressed keys.

mod cpu;
pub mod cuda;

pub use cpu::{IndexShape, index_scores};
pub use cuda::index_scores_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::cpu::quant::round_trip_e2m1_block;
use crate::faults::Faults;

/// The CSA compression ratio: compressed entry j is visible to query t iff j < (t + 1) / 4.
const RATIO: usize = 4;

pub struct IndexScores;

/// The model's head-weight scale, `1 / sqrt(heads * head_dim)`: the cases weigh heads as the indexer does.
fn weight_scale(case: &Case) -> f32 {
    (1.0 / ((case.get("heads") * case.get("head_dim")) as f64).sqrt()) as f32
}

/// Normal values with the FP4 round trip (block 32) the indexer applies to its queries and keys.
fn fp4_values(n: usize, rng: &mut Rng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
    for block in v.chunks_mut(32) {
        round_trip_e2m1_block(block);
    }
    v
}

impl Kernel for IndexScores {
    fn name(&self) -> &'static str {
        "index_scores"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 2e-6,
            rel: 2e-6,
            why: "f32: each head's dot has <= head_dim/16 + 4 roundings in 16 lanes, then one FMA per head: ~2^-20 of sum_h |w_h| |q_h . k|",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, heads, head_dim, keys) in [
            (3, 1, 1, 5),
            (17, 3, 17, 31),
            (9, 5, 257, 13),
            (5, 64, 128, 257),
            (2, 64, 128, 1024),
        ] {
            cases.push(Case::new(
                rows,
                &[("heads", heads), ("head_dim", head_dim), ("keys", keys)],
            ));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (heads, hd, n) = (case.get("heads"), case.get("head_dim"), case.get("keys"));
        // Two sequences of n keys each, back to back, and one spare key after them.
        let keys = fp4_values((2 * n + 1) * hd, rng);
        let q = fp4_values(case.rows * heads * hd, rng);
        let w_scale = (hd as f32).sqrt().recip() * (heads as f32).sqrt().recip();
        let w: Vec<f32> = (0..case.rows * heads).map(|_| rng.normal() * w_scale).collect();
        let mut key_range = Vec::with_capacity(2 * case.rows);
        for r in 0..case.rows {
            // Positions from 0 (nothing visible) to the last one whose n entries are all visible.
            let t = match r {
                0 => 0,
                1 => RATIO * n - 1,
                _ => rng.below((RATIO * n) as u64) as usize,
            };
            let start = if r % 2 == 0 { 0 } else { n };
            key_range.extend([start as i32, ((t + 1) / RATIO) as i32]);
        }
        vec![
            Arg::per_row("q", Buf::F32(q), heads * hd),
            Arg::per_row("w", Buf::F32(w), heads),
            Arg::per_row("key_range", Buf::I32(key_range), 2),
            Arg::shared("keys", Buf::F32(keys)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "scores",
            kind: OutKind::F32,
            row_len: case.get("keys"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (heads, hd, n) = (case.get("heads"), case.get("head_dim"), case.get("keys"));
        let (q, w, range, keys) = (
            inputs[0].buf.f32(),
            inputs[1].buf.f32(),
            inputs[2].buf.i32(),
            inputs[3].buf.f32(),
        );
        let mut y = Vec::with_capacity(case.rows * n);
        for t in 0..case.rows {
            let (start, visible) = (range[2 * t] as usize, range[2 * t + 1] as usize);
            for s in 0..n {
                if s >= visible {
                    y.push(f64::NEG_INFINITY);
                    continue;
                }
                let k = &keys[(start + s) * hd..(start + s + 1) * hd];
                let mut score = 0f64;
                for h in 0..heads {
                    let qh = &q[(t * heads + h) * hd..(t * heads + h + 1) * hd];
                    let d: f64 = qh.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum();
                    score += w[t * heads + h] as f64 * weight_scale(case) as f64 * d.max(0.0);
                }
                y.push(score);
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
        &["no_relu", "visible_off_by_one", "head_order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let shape = IndexShape {
            num_heads: case.get("heads"),
            head_dim: case.get("head_dim"),
            weight_scale: weight_scale(case),
        };
        let (q, w, range, keys) = (
            inputs[0].buf.f32(),
            inputs[1].buf.f32(),
            inputs[2].buf.i32(),
            inputs[3].buf.f32(),
        );
        match launch {
            Launch::Cpu(l) => index_scores(q, w, range, keys, shape, out[0].f32(), l, faults),
            Launch::Cuda(c) => {
                index_scores_cuda(c, q, w, range, keys, shape, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
