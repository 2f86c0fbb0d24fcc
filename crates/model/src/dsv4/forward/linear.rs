//! Linear layers of the forward pass: FP8, MXFP4 and bf16 weights against f32 activation rows.

use tensorfold_formats::{bf16, e2m1, e4m3, e8m0};
use tensorfold_kernels::cpu::dot;

use super::Pass;
use crate::dsv4::weights::{Bf16, Fp8, Mxfp4};

/// `x [rows, in] . W^T -> [rows, out]` with rows of `w` produced by `row`.
fn apply(pass: &Pass<'_>, x: &[f32], out_dim: usize, in_dim: usize, row: impl Fn(usize, &mut [f32])) -> Vec<f32> {
    let rows = x.len() / in_dim;
    let mut out = vec![0f32; rows * out_dim];
    let mut w = vec![0f32; in_dim];
    for n in 0..out_dim {
        row(n, &mut w);
        for r in 0..rows {
            out[r * out_dim + n] = dot(&x[r * in_dim..(r + 1) * in_dim], &w, pass.launch.simd);
        }
    }
    out
}

/// FP8 e4m3 weight with 128x128 e8m0 block scales.
pub(crate) fn fp8(pass: &Pass<'_>, x: &[f32], w: &Fp8) -> Vec<f32> {
    let grid_cols = w.in_dim.div_ceil(128);
    apply(pass, x, w.out_dim, w.in_dim, |n, row| {
        for (k, v) in row.iter_mut().enumerate() {
            *v = e4m3::decode(w.codes[n * w.in_dim + k]) * e8m0::decode(w.scales[n / 128 * grid_cols + k / 128]);
        }
    })
}

/// MXFP4 weight: e2m1 pairs with e8m0 scales per 32.
pub(crate) fn mxfp4(pass: &Pass<'_>, x: &[f32], w: &Mxfp4) -> Vec<f32> {
    apply(pass, x, w.out_dim, w.in_dim, |n, row| {
        for (k, v) in row.iter_mut().enumerate() {
            let byte = w.packed[(n * w.in_dim + k) / 2];
            let code = if k % 2 == 0 { byte & 0xF } else { byte >> 4 };
            *v = e2m1::decode(code) * e8m0::decode(w.scales[n * w.in_dim / 32 + k / 32]);
        }
    })
}

/// bf16 weight.
pub(crate) fn bf16(pass: &Pass<'_>, x: &[f32], w: &Bf16) -> Vec<f32> {
    apply(pass, x, w.out_dim, w.in_dim, |n, row| {
        for (k, v) in row.iter_mut().enumerate() {
            let i = 2 * (n * w.in_dim + k);
            *v = bf16::bf16_to_f32(u16::from_le_bytes([w.bytes[i], w.bytes[i + 1]]));
        }
    })
}

/// DeepSeek V4's grouped output projection: group `i` of `x` against rows `i*out/g..` of `w`.
pub(crate) fn grouped(pass: &Pass<'_>, x: &[f32], w: &Fp8, groups: usize) -> Vec<f32> {
    let (in_g, out_g) = (w.in_dim, w.out_dim / groups);
    let rows = x.len() / (in_g * groups);
    let mut out = vec![0f32; rows * w.out_dim];
    let full = fp8_rows(w);
    for r in 0..rows {
        for g in 0..groups {
            let xg = &x[(r * groups + g) * in_g..(r * groups + g + 1) * in_g];
            for j in 0..out_g {
                let n = g * out_g + j;
                out[r * w.out_dim + n] = dot(xg, &full[n * in_g..(n + 1) * in_g], pass.launch.simd);
            }
        }
    }
    out
}

fn fp8_rows(w: &Fp8) -> Vec<f32> {
    let grid_cols = w.in_dim.div_ceil(128);
    (0..w.out_dim * w.in_dim)
        .map(|i| {
            let (n, k) = (i / w.in_dim, i % w.in_dim);
            e4m3::decode(w.codes[i]) * e8m0::decode(w.scales[n / 128 * grid_cols + k / 128])
        })
        .collect()
}
