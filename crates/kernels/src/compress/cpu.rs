//! CPU `compress`: one compressed entry per row; (row, channel) items split over threads, slots in fixed order.

use crate::cpu::{CpuLaunch, math, par_chunks_mut};
use crate::faults::Faults;

/// Channels handled together, so the per-slot logits of one block stay in L1.
const CHANNEL_BLOCK: usize = 64;

/// One compressor's sizes: `ratio` tokens a window, `head_dim` channels an entry, `overlap` for the ratio-4 (CSA) layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressShape {
    pub ratio: usize,
    pub head_dim: usize,
    pub overlap: bool,
}

impl CompressShape {
    /// Values per token in the kv and gate projections and in `ape`'s rows: `2 * head_dim` when overlapping.
    pub fn width(&self) -> usize {
        if self.overlap { 2 * self.head_dim } else { self.head_dim }
    }

    /// Token slots per entry: the previous then the current window when overlapping, else the current window.
    pub fn slots(&self) -> usize {
        if self.overlap { 2 * self.ratio } else { self.ratio }
    }

    /// Where slot `s` reads: (row of `ape`, first dim) — the previous window's slots use dims [0, hd), the rest [hd, 2hd).
    pub fn slot_source(&self, s: usize) -> (usize, usize) {
        let dim0 = if self.overlap && s >= self.ratio {
            self.head_dim
        } else {
            0
        };
        (s % self.ratio, dim0)
    }
}

/// `out[r, c] = sum_s softmax_s(gate[t_s, d_s + c] + ape[s % ratio, d_s + c]) * kv[t_s, d_s + c]` over row r's token slots (`-1`: masked).
#[allow(clippy::too_many_arguments)]
pub fn compress(
    kv: &[f32],
    gate: &[f32],
    ape: &[f32],
    token_idx: &[i32],
    shape: CompressShape,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let (hd, width, slots) = (shape.head_dim, shape.width(), shape.slots());
    assert_eq!(kv.len(), gate.len(), "compress: kv and gate tables differ in length");
    assert_eq!(
        kv.len() % width,
        0,
        "compress: token tables are not whole rows of {width}"
    );
    assert_eq!(ape.len(), shape.ratio * width, "compress: ape is not [ratio, width]");
    assert_eq!(out.len() % hd, 0, "compress: output is not whole rows of {hd}");
    let rows = out.len() / hd;
    assert_eq!(
        token_idx.len(),
        rows * slots,
        "compress: token_idx is not [rows, {slots}]"
    );
    let num_tokens = kv.len() / width;
    for row in token_idx.chunks(slots) {
        assert!(row.iter().any(|&t| t >= 0), "compress: a row has no token");
        assert!(
            row.iter().all(|&t| t < num_tokens as i32),
            "compress: token index out of range"
        );
    }
    let unmask = faults.on("unmasked_slot");
    let same_half = faults.on("ape_same_half");
    let reverse_sum = faults.on("sum_order_by_threads") && launch.threads > 1;
    par_chunks_mut(out, 1, launch.split_threads(out.len()), |first, chunk| {
        let mut logits = vec![0f32; slots * CHANNEL_BLOCK];
        let mut at = 0;
        while at < chunk.len() {
            let (row, c0) = ((first + at) / hd, (first + at) % hd);
            let n = (hd - c0).min(CHANNEL_BLOCK).min(chunk.len() - at);
            let tokens = &token_idx[row * slots..(row + 1) * slots];
            let y = &mut chunk[at..at + n];
            let z = &mut logits[..slots * n];
            // Slot logits `gate + ape`; a masked slot stays -inf so its weight is exactly 0.
            for (s, zs) in z.chunks_mut(n).enumerate() {
                let t = if unmask { tokens[s].max(0) } else { tokens[s] };
                if t < 0 {
                    zs.fill(f32::NEG_INFINITY);
                    continue;
                }
                let (a, d) = shape.slot_source(s);
                let g = &gate[t as usize * width + d + c0..][..n];
                let ape_d = if same_half { 0 } else { d };
                let b = &ape[a * width + ape_d + c0..][..n];
                for ((zc, &gc), &bc) in zs.iter_mut().zip(g).zip(b) {
                    *zc = gc + bc;
                }
            }
            for (c, yc) in y.iter_mut().enumerate() {
                let mut m = f32::NEG_INFINITY;
                for s in 0..slots {
                    m = m.max(z[s * n + c]);
                }
                let mut den = 0f32;
                for i in 0..slots {
                    let s = if reverse_sum { slots - 1 - i } else { i };
                    let e = math::exp(z[s * n + c] - m);
                    z[s * n + c] = e;
                    den += e;
                }
                let mut acc = 0f32;
                for (s, &t) in tokens.iter().enumerate() {
                    let t = if unmask { t.max(0) } else { t };
                    if t < 0 {
                        continue;
                    }
                    let (_, d) = shape.slot_source(s);
                    let p = z[s * n + c] / den;
                    acc = p.mul_add(kv[t as usize * width + d + c0 + c], acc);
                }
                *yc = acc;
            }
            at += n;
        }
    });
}
