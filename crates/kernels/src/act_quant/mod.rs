//! `act_quant`: DeepSeek's FP8 activation round trip, `x = e4m3(clamp(x / s, ±448)) * s` with `s = 2^ceil(log2(amax / 448))` per block.

mod cpu;
pub mod cuda;

pub use cpu::act_quant;
pub use cuda::act_quant_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// Largest e4m3fn magnitude.
pub(crate) const QMAX: f64 = 448.0;
/// DeepSeek's floor on a block's amax.
pub(crate) const AMAX_FLOOR: f64 = 1e-4;

pub struct ActQuant;

/// The nonnegative e4m3fn values in code order: 8 subnormals `m * 2^-9`, then `(1 + m/8) * 2^e` for e in -6..=8, up to 448.
pub(crate) fn e4m3_grid() -> Vec<f64> {
    let mut g: Vec<f64> = (0..8).map(|m| m as f64 / 512.0).collect();
    for e in -6..=8 {
        for m in 0..8 {
            g.push((1.0 + m as f64 / 8.0) * 2f64.powi(e));
        }
    }
    g.pop();
    g
}

/// The nearest grid value to `q` (|q| <= the grid's max), ties to the even code.
pub(crate) fn round_to_grid(q: f64, grid: &[f64]) -> f64 {
    let a = q.abs();
    let hi = grid.partition_point(|&g| g < a).min(grid.len() - 1);
    let lo = hi.saturating_sub(1);
    let pick = if a - grid[lo] < grid[hi] - a {
        lo
    } else if a - grid[lo] > grid[hi] - a {
        hi
    } else if lo % 2 == 0 {
        lo
    } else {
        hi
    };
    grid[pick].copysign(q)
}

/// `2^ceil(log2(amax / qmax))` found by exact comparisons: the smallest power of two `p` with `qmax * p >= amax`.
pub(crate) fn pow2_scale(amax: f64, qmax: f64) -> f64 {
    let mut p = 1.0f64;
    while qmax * p < amax {
        p *= 2.0;
    }
    while qmax * p / 2.0 >= amax {
        p /= 2.0;
    }
    p
}

/// Block inputs as the model feeds them: mixed magnitudes, all-zero and sub-floor blocks, and blocks of exact ties.
pub(crate) fn block_values(rng: &mut Rng, block: usize, qmax: f32, tie_step: f32) -> Vec<f32> {
    let kind = rng.below(8);
    let mag = [1e-7, 1e-3, 0.05, 1.0, 30.0, 2e4][rng.below(6) as usize];
    let scale = 2f32.powi(rng.below(21) as i32 - 10);
    (0..block)
        .map(|i| match kind {
            0 => 0.0,
            // Scale exactly `scale`, every other value a grid midpoint or grid point at that scale.
            1 if i == 0 => qmax * scale,
            1 => scale * (rng.below((2.0 * qmax * tie_step) as u64) as f32 / tie_step - qmax),
            _ => mag * rng.normal(),
        })
        .collect()
}

impl Kernel for ActQuant {
    fn name(&self) -> &'static str {
        "act_quant"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "exact: x / s and q * s are exact for power-of-two s, and RNE to the e4m3 grid is unique",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, dim, n, block) in [
            (1, 1, 1, 128),
            (17, 31, 31, 64),
            (5, 257, 200, 64),
            (7, 512, 448, 64),
            (3, 4096, 4096, 128),
            (4, 2048, 2048, 128),
            (2, 7168, 7168, 128),
        ] {
            cases.push(Case::new(rows, &[("dim", dim), ("n", n), ("block", block)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (dim, block) = (case.get("dim"), case.get("block"));
        let mut x = Vec::with_capacity(case.rows * dim);
        for _ in 0..case.rows {
            let mut row = Vec::with_capacity(dim);
            while row.len() < dim {
                row.extend(block_values(rng, block, QMAX as f32, 1024.0));
            }
            row.truncate(dim);
            x.extend(row);
        }
        vec![Arg::per_row("x", Buf::F32(x), dim)]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (dim, n, block) = (case.get("dim"), case.get("n"), case.get("block"));
        let grid = e4m3_grid();
        let mut y: Vec<f64> = inputs[0].buf.f32().iter().map(|&v| v as f64).collect();
        for row in y.chunks_mut(dim) {
            for b in row[..n].chunks_mut(block) {
                let amax = b.iter().fold(AMAX_FLOOR, |m, v| m.max(v.abs()));
                let s = pow2_scale(amax, QMAX);
                for v in b.iter_mut() {
                    *v = round_to_grid((*v / s).clamp(-QMAX, QMAX), &grid) * s;
                }
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
        &["skip_last_block", "block_plus_one", "block_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, y) = (inputs[0].buf.f32(), out[0].f32());
        let (dim, n, block) = (case.get("dim"), case.get("n"), case.get("block"));
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(x);
                act_quant(y, dim, n, block, l, faults);
            }
            Launch::Cuda(c) => act_quant_cuda(c, x, dim, n, block, y, faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_the_e4m3_code_table() {
        let grid = e4m3_grid();
        assert_eq!(grid.len(), 127);
        for (code, &g) in grid.iter().enumerate() {
            assert_eq!(tensorfold_formats::e4m3::decode(code as u8) as f64, g, "code {code}");
        }
        assert_eq!(round_to_grid(0.5 / 512.0, &grid), 0.0);
        assert_eq!(round_to_grid(-1.5 / 512.0, &grid), -2.0 / 512.0);
        assert_eq!(round_to_grid(17.0, &grid), 16.0);
        assert_eq!(round_to_grid(19.0, &grid), 20.0);
        assert_eq!(
            (pow2_scale(448.0, QMAX), pow2_scale(449.0, QMAX), pow2_scale(1e-4, QMAX)),
            (1.0, 2.0, 2f64.powi(-22))
        );
    }
}
