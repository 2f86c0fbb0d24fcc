//! CPU `sparse_attn`: (row, head) items split over threads; each head's whole list in one pass (no split-KV).

use tensorfold_formats::bf16::{bf16_to_f32, f32_to_bf16};

use super::axpy::axpy;
use crate::cpu::{CpuLaunch, dot, math, par_chunks_mut};
use crate::faults::Faults;

/// Heads of one row handled together, so each gathered KV entry is read once for all of them.
const HEAD_GROUP: usize = 8;

/// The attention's query heads, their width (one shared KV head of the same width) and the softmax scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnShape {
    pub num_heads: usize,
    pub head_dim: usize,
    pub softmax_scale: f32,
    /// Round probabilities to bf16 before P.V, as DeepSeek's official kernel does (transformers does not).
    pub bf16_probs: bool,
}

/// `o[r, h] = sum_e bf16?(p[r, h, e]) * kv[idx[r, e]]` over the row's listed entries (`-1`: none), `p` the softmax with sink of `q[r, h] . kv * scale`.
#[allow(clippy::too_many_arguments)]
pub fn sparse_attn(
    q: &[f32],
    idx: &[i32],
    kv: &[f32],
    sink: &[f32],
    shape: AttnShape,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let (heads, hd) = (shape.num_heads, shape.head_dim);
    assert_eq!(sink.len(), heads, "sparse_attn: sink is not [heads]");
    assert_eq!(
        q.len() % (heads * hd),
        0,
        "sparse_attn: q is not whole rows of [heads, head_dim]"
    );
    assert_eq!(out.len(), q.len(), "sparse_attn: output and q differ in length");
    let rows = q.len() / (heads * hd);
    if rows == 0 {
        return;
    }
    assert_eq!(idx.len() % rows, 0, "sparse_attn: idx is not whole rows");
    assert_eq!(kv.len() % hd, 0, "sparse_attn: kv is not whole rows of {hd}");
    let num_idx = idx.len() / rows;
    let num_entries = kv.len() / hd;
    assert!(
        idx.iter().all(|&e| e >= -1 && e < num_entries as i32),
        "sparse_attn: entry index outside -1..{num_entries}"
    );
    let ctx = Ctx {
        kv,
        sink,
        shape,
        launch,
        no_sink: faults.on("no_sink"),
        unrounded: faults.on("unrounded_probs"),
        padding_as_zero: faults.on("padding_reads_entry_0"),
        split: faults.on("split_by_threads") && launch.threads > 1,
    };
    par_chunks_mut(out, hd, launch.split_threads(out.len()), |first, chunk| {
        let mut entries = Vec::with_capacity(num_idx);
        let mut probs = vec![0f32; HEAD_GROUP * num_idx];
        let items = chunk.len() / hd;
        let mut at = 0;
        while at < items {
            let (row, h0) = ((first + at) / heads, (first + at) % heads);
            let n = (heads - h0).min(HEAD_GROUP).min(items - at);
            entries.clear();
            for &e in &idx[row * num_idx..(row + 1) * num_idx] {
                if e >= 0 || ctx.padding_as_zero {
                    entries.push(e.max(0) as usize);
                }
            }
            let q_heads = &q[(row * heads + h0) * hd..(row * heads + h0 + n) * hd];
            ctx.attend(q_heads, h0, &entries, &mut probs, &mut chunk[at * hd..(at + n) * hd]);
            at += n;
        }
    });
}

/// What every head group reads besides its own query and list.
struct Ctx<'a> {
    kv: &'a [f32],
    sink: &'a [f32],
    shape: AttnShape,
    launch: &'a CpuLaunch,
    no_sink: bool,
    unrounded: bool,
    padding_as_zero: bool,
    split: bool,
}

impl Ctx<'_> {
    /// Heads `h0..h0 + n` of one row (`q_heads` [n, hd]) over `entries` in list order, into `o` [n, hd].
    fn attend(&self, q_heads: &[f32], h0: usize, entries: &[usize], probs: &mut [f32], o: &mut [f32]) {
        let hd = self.shape.head_dim;
        let simd = self.launch.simd;
        let len = entries.len();
        let p = &mut probs[..q_heads.len() / hd * len];
        for (k, &e) in entries.iter().enumerate() {
            let kv_e = &self.kv[e * hd..(e + 1) * hd];
            for (g, q_h) in q_heads.chunks(hd).enumerate() {
                p[g * len + k] = dot(q_h, kv_e, simd) * self.shape.softmax_scale;
            }
        }
        for (g, p_h) in p.chunks_mut(len.max(1)).enumerate().take(q_heads.len() / hd) {
            let sink = self.sink[h0 + g];
            let m0 = if self.no_sink { f32::NEG_INFINITY } else { sink };
            let m = p_h[..len].iter().fold(m0, |m, &s| m.max(s));
            let mut den = 0f32;
            for s in p_h[..len].iter_mut() {
                *s = math::exp(*s - m);
                den += *s;
            }
            if !self.no_sink {
                den += math::exp(sink - m);
            }
            for s in p_h[..len].iter_mut() {
                let v = *s / den;
                *s = if self.unrounded || !self.shape.bf16_probs {
                    v
                } else {
                    bf16_to_f32(f32_to_bf16(v))
                };
            }
        }
        o.fill(0.0);
        let half = if self.split { len / 2 } else { len };
        for (k, &e) in entries[..half].iter().enumerate() {
            let kv_e = &self.kv[e * hd..(e + 1) * hd];
            for (g, o_h) in o.chunks_mut(hd).enumerate() {
                axpy(p[g * len + k], kv_e, o_h, simd);
            }
        }
        if half < len {
            // Planted split-KV: the list's second half summed apart, then added.
            let mut rest = vec![0f32; o.len()];
            for (k, &e) in entries.iter().enumerate().skip(half) {
                let kv_e = &self.kv[e * hd..(e + 1) * hd];
                for (g, r_h) in rest.chunks_mut(hd).enumerate() {
                    axpy(p[g * len + k], kv_e, r_h, simd);
                }
            }
            for (y, r) in o.iter_mut().zip(rest) {
                *y += r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn run(q: &[f32], idx: &[i32], kv: &[f32], sink: &[f32], hd: usize, threads: usize) -> Vec<u32> {
        let shape = AttnShape {
            num_heads: sink.len(),
            head_dim: hd,
            softmax_scale: 0.25,
            bf16_probs: true,
        };
        let launch = CpuLaunch {
            threads,
            ..CpuLaunch::serial()
        };
        let mut out = vec![0f32; q.len()];
        sparse_attn(q, idx, kv, sink, shape, &mut out, &launch, Faults::NONE);
        out.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn padding_width_and_place_and_threads_do_not_change_bits() {
        let (heads, hd) = (11, 20);
        let mut rng = Rng::new(5, 0);
        let q: Vec<f32> = (0..heads * hd).map(|_| rng.normal()).collect();
        let kv: Vec<f32> = (0..9 * hd).map(|_| rng.normal()).collect();
        let sink: Vec<f32> = (0..heads).map(|_| rng.normal()).collect();
        let want = run(&q, &[3, 7, 1], &kv, &sink, hd, 1);
        assert_eq!(run(&q, &[-1, 3, -1, 7, 1, -1, -1], &kv, &sink, hd, 1), want);
        assert_eq!(run(&q, &[3, 7, 1, -1], &kv, &sink, hd, 3), want);
    }

    #[test]
    fn an_empty_list_gives_zeros() {
        let out = run(&[1.0; 6], &[-1, -1], &[2.0; 6], &[0.5, 3.0], 3, 1);
        assert!(out.iter().all(|&b| b == 0));
    }
}
