//! CPU `engram_gate`: rows split over threads; per stream the gate from f64 sums in index order (libm-free), then one f32 FMA per value.

use crate::cpu::math::exp_f64;
use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// Smallest |d| before the signed square root.
const GATE_FLOOR: f64 = 1e-6;

/// `x_i += sigmoid(sign(d_i) sqrt(max(|d_i|, 1e-6))) * v` per stream i, with `d_i = sum_k x q k key * rstd(x_i) rstd(key_i) / sqrt(dim)`.
///
/// `x` and `keys` are `[rows, hc, dim]`, `v` is `[rows, dim]`, `q_weight` and `k_weight` are `[hc, dim]`.
#[allow(clippy::too_many_arguments)]
pub fn engram_gate(
    x: &mut [f32],
    keys: &[f32],
    v: &[f32],
    q_weight: &[f32],
    k_weight: &[f32],
    hc: usize,
    eps: f32,
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(
        hc > 0 && q_weight.len().is_multiple_of(hc),
        "engram_gate: weights are not [hc, dim]"
    );
    let dim = q_weight.len() / hc;
    assert!(dim > 0, "engram_gate: dim is 0");
    assert_eq!(k_weight.len(), hc * dim, "engram_gate: k_weight is not [hc, dim]");
    assert_eq!(x.len() % (hc * dim), 0, "engram_gate: x is not whole rows of [hc, dim]");
    let rows = x.len() / (hc * dim);
    assert_eq!(
        (keys.len(), v.len()),
        (rows * hc * dim, rows * dim),
        "engram_gate: keys or v have the wrong size"
    );
    let no_key_norm = faults.on("no_key_norm");
    let unsigned = faults.on("unsigned_gate");
    let first_stream_only = faults.on("first_stream_gate");
    let eps = eps as f64;
    par_chunks_mut(x, hc * dim, launch.split_threads(x.len()), |first, chunk| {
        for (i, xr) in chunk.chunks_mut(hc * dim).enumerate() {
            let row = first + i;
            let vr = &v[row * dim..(row + 1) * dim];
            let mut gates = vec![0f32; hc];
            for (s, g) in gates.iter_mut().enumerate() {
                let src = if first_stream_only { 0 } else { s };
                let xs = &xr[src * dim..(src + 1) * dim];
                let ks = &keys[(row * hc + src) * dim..][..dim];
                let (qw, kw) = (&q_weight[s * dim..(s + 1) * dim], &k_weight[s * dim..(s + 1) * dim]);
                let (mut dot, mut xx, mut kk) = (0f64, 0f64, 0f64);
                for j in 0..dim {
                    let (a, k) = (xs[j] as f64, ks[j] as f64);
                    dot += a * qw[j] as f64 * kw[j] as f64 * k;
                    xx += a * a;
                    kk += k * k;
                }
                let rstd = |ss: f64| 1.0 / (ss / dim as f64 + eps).sqrt();
                let key_rstd = if no_key_norm { 1.0 } else { rstd(kk) };
                let d = dot * rstd(xx) * key_rstd / (dim as f64).sqrt();
                let mag = d.abs().max(GATE_FLOOR).sqrt();
                // sign(0) is 0, as in the reference code's torch.sign.
                let z = if d == 0.0 {
                    0.0
                } else if unsigned || d > 0.0 {
                    mag
                } else {
                    -mag
                };
                *g = (1.0 / (1.0 + exp_f64(-z))) as f32;
            }
            for (s, g) in gates.iter().enumerate() {
                for (o, &b) in xr[s * dim..(s + 1) * dim].iter_mut().zip(vr) {
                    *o = g.mul_add(b, *o);
                }
            }
        }
    });
}
