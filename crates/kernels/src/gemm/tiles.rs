//! The tile driver of the block-scaled GEMMs: every (row, column) pair's arithmetic is the same in any tile, thread or path.

use std::array::from_fn;
use std::ops::Range;

use super::act::Fp8Rows;
use super::par_columns;
use crate::cpu::{CpuLaunch, SimdPath};
use crate::faults::Faults;

/// Output pairs per tile slot array (AVX2 tiles use the first 8).
pub const PAIRS: usize = 16;
/// Columns sharing one decoded weight-scale panel; thread column ranges start at its multiples.
pub const GROUP: usize = 16;
/// Most rows in one pass over a column group (their decoded activations stay in L2).
const ROW_CAP: usize = 16;

/// A block-scaled weight format the driver can run.
pub(crate) trait BlockWeights: Sync {
    /// Weight scale blocks along K.
    fn blocks(&self) -> usize;
    /// The activation scale block that weight block `kb` lies in.
    fn act_block(&self, kb: usize) -> usize;
    /// Decoded weight scales of columns `cols`: `swt[kb * GROUP + j]` for column `cols[j]`.
    fn fill_scales(&self, cols: &[usize; GROUP], simd: SimdPath, swt: &mut [f32]);
    /// The path of this format's one-row calls under `launch`.
    fn gemv_path(&self, launch: &CpuLaunch) -> SimdPath {
        launch.simd_for(1)
    }
    /// One activation row against the contiguous columns `cols` into `out` by a whole-range path, if the format has one for `simd`.
    fn gemv(&self, simd: SimdPath, a: &[u16], sa: &[f32], cols: Range<usize>, out: &mut [f32], faults: Faults) -> bool {
        let _ = (simd, a, sa, cols, out, faults);
        false
    }
    /// One activation row against `cols`: column j's scale for block kb is `sa[act_block(kb)] * swt[kb * GROUP + off + j]`.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        simd: SimdPath,
        a: &[u16],
        sa: &[f32],
        cols: &[usize],
        swt: &[f32],
        off: usize,
        faults: Faults,
    ) -> [f32; PAIRS];
    /// Pair `ri * cols.len() + ci` is (row `a_rows[ri]`, column `cols[ci]`), scaled by `panel[kb * PAIRS + pair]`; returns acc per pair.
    fn tile(&self, simd: SimdPath, a_rows: &[&[u16]], cols: &[usize], panel: &[f32], faults: Faults) -> [f32; PAIRS];
}

/// The panel of a one-row tile, for paths that take one: `panel[kb * PAIRS + j] = sa[act_block(kb)] * swt[kb * GROUP + off + j]`.
pub(crate) fn row_panel<W: BlockWeights + ?Sized>(w: &W, sa: &[f32], swt: &[f32], off: usize, nr: usize) -> Vec<f32> {
    let mut panel = vec![0f32; w.blocks() * PAIRS];
    for kb in 0..w.blocks() {
        let s = sa[w.act_block(kb)];
        for j in 0..nr {
            panel[kb * PAIRS + j] = s * swt[kb * GROUP + off + j];
        }
    }
    panel
}

/// One GEMM: output [rows, n]; column c of row r reads activation row `r * groups + c / group_cols`.
pub(crate) struct Problem<'a> {
    pub act: &'a Fp8Rows,
    pub rows: usize,
    pub n: usize,
    pub groups: usize,
    pub group_cols: usize,
}

/// (pairs per tile, rows per tile when that many remain) on `simd`.
fn shape(simd: SimdPath) -> (usize, usize) {
    match simd {
        SimdPath::Avx2 => (8, 2),
        _ => (16, 4),
    }
}

/// Runs `w` on `p` into `out` ([rows, n]), threads splitting the columns.
pub(crate) fn run_pairs<W: BlockWeights>(w: &W, p: &Problem, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    super::assert_launch(launch);
    let threads = launch.split_threads(p.rows * p.n * w.blocks() * 8);
    par_columns(out, p.rows, p.n, threads, GROUP, |cols, view| {
        columns(w, p, cols, view, launch, faults)
    });
}

/// Columns `cols` of every row into `view` ([rows, cols.len()]).
fn columns<W: BlockWeights>(
    w: &W,
    p: &Problem,
    cols: Range<usize>,
    view: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let width = cols.len();
    let blocks = w.blocks();
    let (pairs, mr_big) = shape(launch.simd);
    let cap = launch.tile_rows.clamp(1, ROW_CAP);
    let mut swt = vec![0f32; blocks * GROUP];
    let mut panel = vec![0f32; blocks * PAIRS];
    let lost_act_scale = faults.on("lost_act_scale");
    let ones = vec![1f32; p.act.blocks];
    let skip_last_column = faults.on("skip_last_column");
    let mut seg_start = cols.start;
    while seg_start < cols.end {
        // A segment never crosses an activation group, so a tile's columns share their activation rows.
        let group = seg_start / p.group_cols;
        let seg_end = cols.end.min((group + 1) * p.group_cols);
        if p.rows == 1 {
            let sa = if lost_act_scale {
                &ones[..]
            } else {
                p.act.row_scales(group)
            };
            let dst = &mut view[seg_start - cols.start..seg_end - cols.start];
            let keep = dst[dst.len() - 1];
            if w.gemv(
                w.gemv_path(launch),
                p.act.row(group),
                sa,
                seg_start..seg_end,
                dst,
                faults,
            ) {
                if skip_last_column && seg_end == p.n {
                    dst[dst.len() - 1] = keep;
                }
                seg_start = seg_end;
                continue;
            }
        }
        for t0 in (0..p.rows).step_by(cap) {
            let t1 = (t0 + cap).min(p.rows);
            for g0 in (seg_start..seg_end).step_by(GROUP) {
                let g1 = (g0 + GROUP).min(seg_end);
                let gcols: [usize; GROUP] = from_fn(|j| (g0 + j).min(g1 - 1));
                w.fill_scales(&gcols, launch.simd, &mut swt);
                let mut r = t0;
                while r < t1 {
                    let mr = if t1 - r >= mr_big { mr_big } else { 1 };
                    let nr = pairs / mr;
                    let act_rows: [usize; 4] = from_fn(|ri| (r + ri.min(mr - 1)) * p.groups + group);
                    let a_rows: [&[u16]; 4] = from_fn(|ri| p.act.row(act_rows[ri]));
                    let sa: [&[f32]; 4] = from_fn(|ri| {
                        if lost_act_scale {
                            &ones[..]
                        } else {
                            p.act.row_scales(act_rows[ri])
                        }
                    });
                    for n0 in (g0..g1).step_by(nr) {
                        let off = n0 - g0;
                        let tcols: [usize; PAIRS] = from_fn(|ci| gcols[(off + ci).min(GROUP - 1)]);
                        let acc = if mr == 1 {
                            w.row(launch.simd, a_rows[0], sa[0], &tcols[..nr], &swt, off, faults)
                        } else {
                            for kb in 0..blocks {
                                let ab = w.act_block(kb);
                                let ws = &swt[kb * GROUP + off..][..nr];
                                for ri in 0..mr {
                                    let dst = &mut panel[kb * PAIRS + ri * nr..][..nr];
                                    for (d, &s) in dst.iter_mut().zip(ws) {
                                        *d = sa[ri][ab] * s;
                                    }
                                }
                            }
                            w.tile(launch.simd, &a_rows[..mr], &tcols[..nr], &panel, faults)
                        };
                        for ri in 0..mr {
                            for ci in 0..nr.min(g1 - n0) {
                                let n = n0 + ci;
                                if skip_last_column && n + 1 == p.n {
                                    continue;
                                }
                                view[(r + ri) * width + n - cols.start] = acc[ri * nr + ci];
                            }
                        }
                    }
                    r += mr;
                }
            }
        }
        seg_start = seg_end;
    }
}
