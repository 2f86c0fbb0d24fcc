//! `index_topk`: per query row, the compressed entries with the `index_topk` highest indexer scores, ascending, -1 padded.

pub(crate) mod cpu;
pub mod cuda;

pub use cpu::{Place, index_topk, index_topk_placed};
pub use cuda::{index_topk_cuda, index_topk_placed_cuda};

use std::cmp::Ordering;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct IndexTopk;

/// A placed case's picks start at this column of rows `PLACED_EXTRA` wider than `top_k`; the other columns hold `KEPT`.
const PLACED_COL: usize = 5;
const PLACED_EXTRA: usize = 7;
const KEPT: i32 = -7;

fn placed(case: &Case) -> bool {
    case.opt("placed") == Some(1)
}

fn stride(case: &Case) -> usize {
    case.get("top_k") + if placed(case) { PLACED_EXTRA } else { 0 }
}

impl Kernel for IndexTopk {
    fn name(&self) -> &'static str {
        "index_topk"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "integer indices from comparisons only: exact",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, cols, top_k, ties, placed) in [
            (3, 1, 1, 0, 0),
            (17, 31, 16, 1, 0),
            (9, 257, 16, 0, 0),
            (7, 100, 16, 1, 0),
            (5, 600, 512, 0, 0),
            (3, 4099, 512, 1, 0),
            (6, 40, 16, 1, 1),
            (4, 1500, 512, 0, 1),
        ] {
            let params = [("cols", cols), ("top_k", top_k), ("ties", ties), ("placed", placed)];
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
                // With ties on, scores take few values (zero among them, both signs), so ties straddle the cut.
                let s = if ties { (s * 2.0).round() * 0.5 } else { s };
                scores.push(if j < v { s } else { f32::NEG_INFINITY });
            }
        }
        let mut args = vec![
            Arg::per_row("scores", Buf::F32(scores), cols),
            Arg::per_row("num_visible", Buf::I32(visible), 1),
        ];
        if placed(case) {
            let offsets = (0..case.rows).map(|_| rng.below(100_000) as i32).collect();
            args.push(Arg::per_row("offsets", Buf::I32(offsets), 1));
        }
        args
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "indices",
            kind: OutKind::I32,
            row_len: stride(case),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (cols, top_k) = (case.get("cols"), case.get("top_k"));
        let (scores, visible) = (inputs[0].buf.f32(), inputs[1].buf.i32());
        let offsets = placed(case).then(|| inputs[2].buf.i32());
        let mut y = Vec::with_capacity(case.rows * stride(case));
        for r in 0..case.rows {
            let shift = offsets.map_or(0, |o| o[r]) as f64;
            let first = y.len();
            let mut ranked: Vec<(f64, usize)> = (0..visible[r] as usize)
                .map(|j| (scores[r * cols + j] as f64, j))
                .collect();
            ranked.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then(a.1.cmp(&b.1)));
            let mut picked: Vec<usize> = ranked.iter().take(top_k).map(|&(_, j)| j).collect();
            picked.sort();
            y.extend(picked.iter().map(|&j| j as f64 + shift));
            y.extend(std::iter::repeat_n(-1.0, top_k - picked.len()));
            if placed(case) {
                let kept = KEPT as f64;
                y.splice(first..first, std::iter::repeat_n(kept, PLACED_COL));
                y.extend(std::iter::repeat_n(kept, PLACED_EXTRA - PLACED_COL));
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
        &["tie_higher_index", "unpadded_short_rows", "score_order"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (scores, visible, top_k) = (inputs[0].buf.f32(), inputs[1].buf.i32(), case.get("top_k"));
        if !placed(case) {
            match launch {
                Launch::Cpu(l) => index_topk(scores, visible, top_k, out[0].i32(), l, faults),
                Launch::Cuda(c) => {
                    index_topk_cuda(c, scores, visible, top_k, out[0].i32(), faults).unwrap_or_else(|e| panic!("{e}"))
                }
            }
            return;
        }
        // The row's other columns must come back as they were: they start as KEPT, the harness's poison stays outside.
        let place = Place {
            stride: stride(case),
            col: PLACED_COL,
            offsets: Some(inputs[2].buf.i32()),
        };
        let mut rows = vec![KEPT; out[0].i32().len()];
        match launch {
            Launch::Cpu(l) => index_topk_placed(scores, visible, top_k, place, &mut rows, l, faults),
            Launch::Cuda(c) => index_topk_placed_cuda(c, scores, visible, top_k, place, &mut rows, faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
        out[0].i32().copy_from_slice(&rows);
    }
}
