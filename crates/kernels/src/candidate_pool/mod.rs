//! `candidate_pool`: DeepSeek V4.1's candidate blocks per query row, the top blocks of indexer scores by their maximum, the newest block always kept.

mod cpu;
mod cuda;

pub use cpu::candidate_pool;
pub use cuda::candidate_pool_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct CandidatePool;

impl Kernel for CandidatePool {
    fn name(&self) -> &'static str {
        "candidate_pool"
    }

    fn family(&self) -> &'static str {
        "dsv41"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "integer block ids from maxima and comparisons only: exact",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, cols, block, top_blocks, ties) in [
            (3, 1, 8, 2, 0),
            (17, 31, 4, 3, 1),
            (9, 257, 8, 16, 0),
            (7, 100, 3, 5, 1),
            (5, 600, 8, 32, 1),
            (3, 20_000, 8, 2048, 0),
        ] {
            let params = [
                ("cols", cols),
                ("block", block),
                ("top_blocks", top_blocks),
                ("ties", ties),
            ];
            cases.push(Case::new(rows, &params));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let cols = case.get("cols");
        let ties = case.get("ties") == 1;
        let mut scores = Vec::with_capacity(case.rows * cols);
        let mut visible = Vec::with_capacity(case.rows);
        for r in 0..case.rows {
            let v = match r {
                0 => 0,
                1 => cols,
                _ => rng.below(cols as u64 + 1) as usize,
            };
            visible.push(v as i32);
            for j in 0..cols {
                let s = rng.normal();
                // With ties on, scores take few values, so equal block maxima straddle the cut.
                let s = if ties { (s * 2.0).round() * 0.5 } else { s };
                scores.push(if j < v { s } else { f32::NEG_INFINITY });
            }
        }
        vec![
            Arg::per_row("scores", Buf::F32(scores), cols),
            Arg::per_row("num_visible", Buf::I32(visible), 1),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "blocks",
            kind: OutKind::I32,
            row_len: case.get("top_blocks"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (cols, block, top) = (case.get("cols"), case.get("block"), case.get("top_blocks"));
        let (scores, visible) = (inputs[0].buf.f32(), inputs[1].buf.i32());
        let mut y = Vec::with_capacity(case.rows * top);
        for r in 0..case.rows {
            let v = visible[r] as usize;
            let num_blocks = v.div_ceil(block);
            let mut ranked: Vec<(f64, usize)> = (0..num_blocks)
                .map(|b| {
                    let max = (b * block..((b + 1) * block).min(v))
                        .map(|j| scores[r * cols + j] as f64)
                        .fold(f64::NEG_INFINITY, f64::max);
                    (if b + 1 == num_blocks { f64::INFINITY } else { max }, b)
                })
                .collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut picked: Vec<usize> = ranked.iter().take(top).map(|&(_, b)| b).collect();
            picked.sort();
            y.extend(picked.iter().map(|&b| b as f64));
            y.extend(std::iter::repeat_n(-1.0, top - picked.len()));
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
        &["newest_not_forced", "tie_higher_block", "block_sum"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (block, top) = (case.get("block"), case.get("top_blocks"));
        let (scores, visible) = (inputs[0].buf.f32(), inputs[1].buf.i32());
        match launch {
            Launch::Cpu(l) => candidate_pool(scores, visible, block, top, out[0].i32(), l, faults),
            Launch::Cuda(c) => candidate_pool_cuda(c, scores, visible, block, top, out[0].i32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
