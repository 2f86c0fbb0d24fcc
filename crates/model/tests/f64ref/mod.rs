//! A float64 recomputation of DeepSeek V4's MTP layer from the checkpoint's tensors, written from MODELS.md's math.

use std::cell::{Cell, RefCell};

use tensorfold_formats::{bf16, e2m1, e4m3, e8m0};
use tensorfold_kernels::rope::inv_freqs;
use tensorfold_model::config::dsv4::Dsv4Config;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::weights::{Attention, Bf16, Block, Fp8, Hc, Moe, Mxfp4, Routing};

/// Which of the official semantics' roundings the reference applies, and where.
#[derive(Clone, Copy, Debug)]
pub struct Roundings {
    /// FP8 act_quant (per 128 along K) of every FP8 and MXFP4 GEMM input except wo_a's.
    pub gemm_inputs: bool,
    /// The same on wo_a's grouped input; DeepSeek's model.py dequantises wo_a to bf16, so official is off.
    pub wo_a_input: bool,
    /// FP8 round trip (block 64) of the KV's non-RoPE dims.
    pub kv_fp8: bool,
    /// Attention probabilities rounded to bf16 before P.V.
    pub bf16_probs: bool,
}

impl Roundings {
    /// DeepSeek's official inference code.
    pub const OFFICIAL: Roundings = Roundings {
        gemm_inputs: true,
        wo_a_input: false,
        kv_fp8: true,
        bf16_probs: true,
    };
}

/// FP8 e4m3: 3 mantissa bits, normals from 2^-6, largest 448.
const E4M3_MAX: f64 = 448.0;

/// An FP8 value within this fraction of its block's amax of a tie may round the other way from f32: a few f32 errors.
const FP8_TIE: f64 = 5e-7;
/// The same for a bf16 probability, as a fraction of it.
const PROB_TIE: f64 = 3e-6;
/// The same for the gap between the router's k-th and next biased scores.
const ROUTER_TIE: f64 = 1e-6;

/// The step of a float grid with `mant` mantissa bits (uniform below `2^min_exp`) at `v`.
fn quantum(v: f64, mant: i32, min_exp: i32) -> f64 {
    let exp = (((v.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp);
    2f64.powi(exp - mant)
}

/// `v` rounded to nearest-even on that grid.
fn round_float(v: f64, mant: i32, min_exp: i32) -> f64 {
    let q = quantum(v, mant, min_exp);
    (v / q).round_ties_even() * q
}

/// Whether `v` lies within `tol` of a midpoint of the grid of step `q`.
fn near_tie(v: f64, q: f64, tol: f64) -> bool {
    let t = v / q;
    ((t - t.floor()) - 0.5).abs() * q < tol
}

/// DeepSeek's act_quant of the first `n` of each `row_len` row per `block` (pow2 scale, e4m3); flags rows near a tie.
fn act_quant(x: &mut [f64], row_len: usize, n: usize, block: usize) -> Vec<bool> {
    let mut ties = Vec::new();
    for row in x.chunks_mut(row_len) {
        let mut tie = false;
        for b in row[..n].chunks_mut(block) {
            let amax = b.iter().fold(1e-4f64, |m, v| m.max(v.abs()));
            let ratio = amax / E4M3_MAX;
            let s = 2f64.powi(ratio.log2().ceil() as i32);
            tie |= (ratio / 2f64.powi(ratio.log2().round() as i32) - 1.0).abs() < FP8_TIE;
            for v in b.iter_mut() {
                let q = (*v / s).clamp(-E4M3_MAX, E4M3_MAX);
                tie |= near_tie(q, quantum(q, 3, -6), FP8_TIE * amax / s);
                *v = round_float(q, 3, -6) * s;
            }
        }
        ties.push(tie);
    }
    ties
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `W[n, k] = e4m3[n, k] * e8m0[n / 128, k / 128]`.
fn dequant_fp8(w: &Fp8) -> Vec<f64> {
    let grid_cols = w.in_dim.div_ceil(128);
    let mut out = Vec::with_capacity(w.out_dim * w.in_dim);
    for n in 0..w.out_dim {
        for k in 0..w.in_dim {
            let s = e8m0::decode(w.scales[n / 128 * grid_cols + k / 128]) as f64;
            out.push(e4m3::decode(w.codes[n * w.in_dim + k]) as f64 * s);
        }
    }
    out
}

/// `W[n, k] = e2m1[n, k] * e8m0[n, k / 32]`, element 2j in the low nibble of byte j.
fn dequant_mxfp4(w: &Mxfp4) -> Vec<f64> {
    let mut out = Vec::with_capacity(w.out_dim * w.in_dim);
    for n in 0..w.out_dim {
        for k in 0..w.in_dim {
            let byte = w.packed[(n * w.in_dim + k) / 2];
            let nibble = if k % 2 == 0 { byte & 0xF } else { byte >> 4 };
            let s = e8m0::decode(w.scales[n * (w.in_dim / 32) + k / 32]) as f64;
            out.push(e2m1::decode(nibble) as f64 * s);
        }
    }
    out
}

fn dequant_bf16(w: &Bf16) -> Vec<f64> {
    w.bytes
        .chunks_exact(2)
        .map(|c| bf16::bf16_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64)
        .collect()
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// `x [rows, in] . W^T` for a dequantised `W [out, in]`.
fn linear(x: &[f64], w: &[f64], in_dim: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len() / in_dim * (w.len() / in_dim));
    for row in x.chunks(in_dim) {
        out.extend(w.chunks(in_dim).map(|wn| dot(row, wn)));
    }
    out
}

/// Where a GEMM input's rows come from: the token of row 0 and rows per token.
#[derive(Clone, Copy)]
struct Site(usize, usize);

/// The reference's logits and which rows hold a rounding the engine's f32 values may take the other way.
pub struct RefLogits {
    pub logits: Vec<f64>, // [rows, vocab]
    pub near_tie: Vec<bool>,
    pub num_ties: usize,
}

/// The MTP layer in f64 for one sequence from position 0; weights dequantised once.
pub struct MtpRef<'a> {
    c: &'a Dsv4Config,
    m: &'a Dsv4Model,
    mtp_idx: usize,
    r: Roundings,
    head: Vec<f64>, // [vocab, D]
    rope: Vec<f64>, // [qk_rope_head_dim / 2]
    near_tie: RefCell<Vec<bool>>,
    num_ties: Cell<usize>,
}

impl<'a> MtpRef<'a> {
    pub fn new(m: &'a Dsv4Model, mtp_idx: usize, r: Roundings) -> MtpRef<'a> {
        let c = &m.config;
        let ratio = c.compress_ratios[c.num_hidden_layers + mtp_idx];
        assert_eq!(ratio, 0, "the reference covers window-only MTP layers");
        let rope = f64s(&inv_freqs(c.qk_rope_head_dim, c.rope_theta, None));
        MtpRef {
            c,
            m,
            mtp_idx,
            r,
            head: dequant_bf16(&m.weights.head),
            rope,
            near_tie: RefCell::new(Vec::new()),
            num_ties: Cell::new(0),
        }
    }

    /// Records a rounding near a tie in `token`'s row.
    fn mark(&self, token: usize) {
        self.near_tie.borrow_mut()[token] = true;
        self.num_ties.set(self.num_ties.get() + 1);
    }

    fn rms(&self, x: &[f64], w: &[f32]) -> Vec<f64> {
        let d = w.len();
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(d) {
            let inv = 1.0 / (dot(row, row) / d as f64 + self.c.rms_norm_eps).sqrt();
            y.extend(row.iter().zip(w).map(|(v, &g)| v * inv * g as f64));
        }
        y
    }

    /// A GEMM input `[rows, in_dim]` act-quantised when `quant`, its near ties recorded at `site`.
    fn quant(&self, x: &[f64], in_dim: usize, quant: bool, site: Site) -> Vec<f64> {
        let mut xq = x.to_vec();
        if quant {
            let ties = act_quant(&mut xq, in_dim, in_dim, 128);
            for (i, _) in ties.iter().enumerate().filter(|(_, t)| **t) {
                self.mark(site.0 + i / site.1);
            }
        }
        xq
    }

    /// An FP8 or MXFP4 GEMM against dequantised `w`.
    fn gemm(&self, x: &[f64], w: &[f64], in_dim: usize, quant: bool, site: Site) -> Vec<f64> {
        linear(&self.quant(x, in_dim, quant, site), w, in_dim)
    }

    fn fp8(&self, x: &[f64], w: &Fp8, site: Site) -> Vec<f64> {
        self.gemm(x, &dequant_fp8(w), w.in_dim, self.r.gemm_inputs, site)
    }

    /// Rotates interleaved pairs of the last rope dims of each `head_dim` head of row `x` at `pos`.
    fn rope(&self, x: &mut [f64], pos: usize, inverse: bool) {
        let (hd, half) = (self.c.head_dim, self.rope.len());
        let sign = if inverse { -1.0 } else { 1.0 };
        for head in x.chunks_mut(hd) {
            let rot = &mut head[hd - 2 * half..];
            for (i, &f) in self.rope.iter().enumerate() {
                let angle = pos as f64 * f;
                let (c, s) = (angle.cos(), sign * angle.sin());
                let (a, b) = (rot[2 * i], rot[2 * i + 1]);
                rot[2 * i] = a * c - b * s;
                rot[2 * i + 1] = a * s + b * c;
            }
        }
    }

    /// mHC mixing logits of one row's flattened streams: `(x . fn^T) / rms(x)`.
    fn mix(&self, x: &[f64], fn_: &[f32]) -> Vec<f64> {
        let inv = 1.0 / (dot(x, x) / x.len() as f64 + self.c.rms_norm_eps).sqrt();
        fn_.chunks(x.len())
            .map(|w| x.iter().zip(w).map(|(a, &b)| a * b as f64).sum::<f64>() * inv)
            .collect()
    }

    /// One row's `pre [hc]`, `post [hc]` and Sinkhorn-projected `comb [hc][hc]`.
    fn split(&self, mix: &[f64], hc: &Hc) -> (Vec<f64>, Vec<f64>, Vec<Vec<f64>>) {
        let (n, eps) = (self.c.hc_mult, self.c.hc_eps);
        let (scale, base) = (f64s(&hc.scale), f64s(&hc.base));
        let pre = (0..n).map(|j| sigmoid(mix[j] * scale[0] + base[j]) + eps).collect();
        let post = (0..n)
            .map(|j| 2.0 * sigmoid(mix[n + j] * scale[1] + base[n + j]))
            .collect();
        let mut comb: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| mix[2 * n + i * n + j] * scale[2] + base[2 * n + i * n + j])
                    .collect()
            })
            .collect();
        for row in comb.iter_mut() {
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter_mut().for_each(|v| *v = (*v - max).exp() / sum + eps);
        }
        let cols = |c: &mut Vec<Vec<f64>>| {
            for j in 0..n {
                let s = (0..n).map(|i| c[i][j]).sum::<f64>() + eps;
                c.iter_mut().for_each(|row| row[j] /= s);
            }
        };
        cols(&mut comb);
        for _ in 1..self.c.hc_sinkhorn_iters {
            for row in comb.iter_mut() {
                let s = row.iter().sum::<f64>() + eps;
                row.iter_mut().for_each(|v| *v /= s);
            }
            cols(&mut comb);
        }
        (pre, post, comb)
    }

    /// One mHC-wrapped sub-block over streams `x [rows, hc, D]`: `X'_j = post_j f(norm(pre . X)) + sum_i C[i][j] X_i`.
    fn sub_block(&self, x: &[f64], hc: &Hc, norm: &[f32], f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
        let (n, d) = (self.c.hc_mult, self.c.hidden_size);
        let maps: Vec<_> = x
            .chunks(n * d)
            .map(|row| self.split(&self.mix(row, &hc.fn_), hc))
            .collect();
        let y: Vec<f64> = x
            .chunks(n * d)
            .zip(&maps)
            .flat_map(|(row, (pre, _, _))| (0..d).map(move |k| (0..n).map(|i| pre[i] * row[i * d + k]).sum::<f64>()))
            .collect();
        let out = f(&self.rms(&y, norm));
        let mut next = Vec::with_capacity(x.len());
        for (r, (row, (_, post, comb))) in x.chunks(n * d).zip(&maps).enumerate() {
            for j in 0..n {
                next.extend(
                    (0..d).map(|k| post[j] * out[r * d + k] + (0..n).map(|i| comb[i][j] * row[i * d + k]).sum::<f64>()),
                );
            }
        }
        next
    }

    /// Sliding-window attention with the sink over the rows `x [rows, D]` at positions 0.., returning `[rows, D]`.
    fn attention(&self, w: &Attention, x: &[f64]) -> Vec<f64> {
        let c = self.c;
        let (rows, h, hd, rope_dim) = (
            x.len() / c.hidden_size,
            c.num_attention_heads,
            c.head_dim,
            c.qk_rope_head_dim,
        );
        let eps = c.rms_norm_eps;
        let window = c.sliding_window;
        let xq = self.quant(x, c.hidden_size, self.r.gemm_inputs, Site(0, 1)); // wq_a's and wkv's input
        let qr = self.rms(&linear(&xq, &dequant_fp8(&w.wq_a), c.hidden_size), &w.q_norm); // [rows, q_lora]
        let mut q = self.fp8(&qr, &w.wq_b, Site(0, 1)); // [rows, H * hd]
        for head in q.chunks_mut(hd) {
            let inv = 1.0 / (dot(head, head) / hd as f64 + eps).sqrt();
            head.iter_mut().for_each(|v| *v *= inv);
        }
        let mut kv = self.rms(&linear(&xq, &dequant_fp8(&w.wkv), c.hidden_size), &w.kv_norm); // [rows, hd]
        for t in 0..rows {
            self.rope(&mut q[t * h * hd..(t + 1) * h * hd], t, false);
            self.rope(&mut kv[t * hd..(t + 1) * hd], t, false);
        }
        if self.r.kv_fp8 {
            let ties = act_quant(&mut kv, hd, hd - rope_dim, 64);
            for (t, _) in ties.iter().enumerate().filter(|(_, t)| **t) {
                self.mark(t);
            }
        }
        let scale = 1.0 / (hd as f64).sqrt();
        let mut o = vec![0f64; rows * h * hd]; // [rows, H, hd]
        for t in 0..rows {
            let visible = t.saturating_sub(window - 1)..=t;
            for head in 0..h {
                let qh = &q[(t * h + head) * hd..(t * h + head + 1) * hd];
                let scores: Vec<f64> = visible
                    .clone()
                    .map(|s| dot(qh, &kv[s * hd..(s + 1) * hd]) * scale)
                    .collect();
                let sink = w.attn_sink[head] as f64;
                let max = scores.iter().fold(sink, |m, &v| m.max(v));
                let den = scores.iter().map(|v| (v - max).exp()).sum::<f64>() + (sink - max).exp();
                let oh = &mut o[(t * h + head) * hd..(t * h + head + 1) * hd];
                for (s, score) in visible.clone().zip(&scores) {
                    let mut p = (score - max).exp() / den;
                    if self.r.bf16_probs {
                        if near_tie(p, quantum(p, 7, -126), PROB_TIE * p) {
                            self.mark(t);
                        }
                        p = round_float(p, 7, -126);
                    }
                    oh.iter_mut()
                        .zip(&kv[s * hd..(s + 1) * hd])
                        .for_each(|(a, v)| *a += p * v);
                }
            }
            self.rope(&mut o[t * h * hd..(t + 1) * h * hd], t, true);
        }
        let (groups, group_in) = (c.o_groups, h * hd / c.o_groups);
        let wo_a = dequant_fp8(&w.wo_a); // [groups * o_lora, group_in]
        let o_lora = w.wo_a.out_dim / groups;
        let mut oa = Vec::with_capacity(rows * groups * o_lora);
        for (i, xg) in o.chunks(group_in).enumerate() {
            let g = i % groups;
            let wg = &wo_a[g * o_lora * group_in..(g + 1) * o_lora * group_in];
            oa.extend(self.gemm(xg, wg, group_in, self.r.wo_a_input, Site(i / groups, 1)));
        }
        self.fp8(&oa, &w.wo_b, Site(0, 1))
    }

    /// The mixture of experts on rows `x [rows, D]`: biased sqrt-softplus router, MXFP4 experts, FP8 shared expert.
    fn moe(&self, w: &Moe, x: &[f64]) -> Vec<f64> {
        let c = self.c;
        let (d, k, limit) = (c.hidden_size, c.num_experts_per_tok, c.swiglu_limit);
        let Routing::Bias(bias) = &w.routing else {
            panic!("the reference covers biased routing only (the MTP layer's)")
        };
        let logits = linear(x, &dequant_bf16(&w.gate), d);
        let experts: Vec<[Vec<f64>; 3]> = w
            .experts
            .iter()
            .map(|e| [dequant_mxfp4(&e.w1), dequant_mxfp4(&e.w3), dequant_mxfp4(&e.w2)])
            .collect();
        let swiglu = |g: &[f64], u: &[f64], route: f64| -> Vec<f64> {
            g.iter()
                .zip(u)
                .map(|(&g, &u)| {
                    let g = g.min(limit);
                    route * g * sigmoid(g) * u.clamp(-limit, limit)
                })
                .collect()
        };
        let mut out = Vec::with_capacity(x.len());
        for (t, (row, z)) in x.chunks(d).zip(logits.chunks(w.experts.len())).enumerate() {
            let site = Site(t, 1);
            let s: Vec<f64> = z
                .iter()
                .map(|&v| (v.max(0.0) + (-v.abs()).exp().ln_1p()).sqrt())
                .collect();
            let mut order: Vec<usize> = (0..s.len()).collect();
            let key = |e: usize| s[e] + bias[e] as f64;
            order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
            if key(order[k - 1]) - key(order[k]) < ROUTER_TIE {
                self.mark(t);
            }
            let sum: f64 = order[..k].iter().map(|&e| s[e]).sum();
            let mut y = vec![0f64; d];
            for &e in &order[..k] {
                let route = s[e] / sum * c.routed_scaling_factor;
                let [w1, w3, w2] = &experts[e];
                let inter = w.experts[e].w1.out_dim;
                let h = swiglu(
                    &self.gemm(row, w1, d, self.r.gemm_inputs, site),
                    &self.gemm(row, w3, d, self.r.gemm_inputs, site),
                    route,
                );
                let ye = self.gemm(&h, w2, inter, self.r.gemm_inputs, site);
                y.iter_mut().zip(&ye).for_each(|(a, b)| *a += b);
            }
            if let Some(sh) = &w.shared {
                let h = swiglu(&self.fp8(row, &sh.w1, site), &self.fp8(row, &sh.w3, site), 1.0);
                let ys = self.fp8(&h, &sh.w2, site);
                y.iter_mut().zip(&ys).for_each(|(a, b)| *a += b);
            }
            out.extend(y);
        }
        out
    }

    fn block(&self, w: &Block, x: &[f64]) -> Vec<f64> {
        let x = self.sub_block(x, &w.hc_attn, &w.attn_norm, |y| self.attention(&w.attn, y));
        self.sub_block(&x, &w.hc_ffn, &w.ffn_norm, |y| self.moe(&w.ffn, y))
    }

    /// `[rows, vocab]` logits: row i joins `streams` row i with the embedding of `next_ids[i]`.
    pub fn logits(&self, next_ids: &[u32], streams: &[f32]) -> RefLogits {
        let c = self.c;
        *self.near_tie.borrow_mut() = vec![false; next_ids.len()];
        self.num_ties.set(0);
        let w = &self.m.weights.mtp[self.mtp_idx];
        let (n, d) = (c.hc_mult, c.hidden_size);
        let embed = &self.m.weights.embed.bytes;
        let emb: Vec<f64> = next_ids
            .iter()
            .flat_map(|&t| {
                let row = &embed[2 * t as usize * d..2 * (t as usize + 1) * d];
                row.chunks_exact(2)
                    .map(|b| bf16::bf16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64)
            })
            .collect();
        let e = self.fp8(&self.rms(&emb, &w.enorm), &w.e_proj, Site(0, 1)); // [rows, D]
        let h = self.fp8(&self.rms(&f64s(streams), &w.hnorm), &w.h_proj, Site(0, n)); // [rows * hc, D]
        let x: Vec<f64> = h
            .iter()
            .enumerate()
            .map(|(i, v)| v + e[i / (n * d) * d + i % d])
            .collect();
        let x = self.block(&w.block, &x);
        let mut logits = Vec::with_capacity(next_ids.len() * c.vocab_size);
        for row in x.chunks(n * d) {
            let mix = self.mix(row, &w.hc_head.fn_);
            let pre: Vec<f64> = (0..n)
                .map(|j| sigmoid(mix[j] * w.hc_head.scale[0] as f64 + w.hc_head.base[j] as f64) + c.hc_eps)
                .collect();
            let y: Vec<f64> = (0..d).map(|k| (0..n).map(|j| pre[j] * row[j * d + k]).sum()).collect();
            logits.extend(linear(&self.rms(&y, &w.norm), &self.head, d));
        }
        RefLogits {
            logits,
            near_tie: self.near_tie.take(),
            num_ties: self.num_ties.get(),
        }
    }
}
