//! `rope`: interleaved rotary embedding on the last `rope_dim` values of each head, one position per token row.

mod cpu;
pub mod cuda;
mod freqs;

pub use cpu::{MAX_POSITION, rope};
pub use cuda::rope_cuda;
pub use freqs::{Yarn, inv_freqs};

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// `rope_theta` of the ratio-0 (sliding-window only) layers.
pub const ROPE_THETA: f64 = 10000.0;
/// `compress_rope_theta` of the compressed layers, which also take the YaRN ramp.
pub const COMPRESS_ROPE_THETA: f64 = 160000.0;

pub struct Rope;

/// The inverse-frequency table a case uses.
fn case_freqs(case: &Case) -> Vec<f32> {
    match case.get("yarn") {
        0 => inv_freqs(case.get("rope_dim"), ROPE_THETA, None),
        _ => inv_freqs(case.get("rope_dim"), COMPRESS_ROPE_THETA, Some(Yarn::DSV4)),
    }
}

/// The reference's own table: `theta^(-2i/d)` and DeepSeek's YaRN ramp from std's f64 libm, rounded to f32.
fn reference_freqs(rope_dim: usize, yarn: bool) -> Vec<f64> {
    let d = rope_dim as f64;
    let theta = if yarn { COMPRESS_ROPE_THETA } else { ROPE_THETA };
    let (factor, original, beta_fast, beta_slow) = (16.0, 65536.0, 32.0, 1.0);
    let corr = |rotations: f64| d * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln());
    let low = corr(beta_fast).floor().max(0.0);
    let high = corr(beta_slow).ceil().min(d - 1.0);
    let high = if low == high { high + 0.001 } else { high };
    (0..rope_dim / 2)
        .map(|i| {
            let f = theta.powf(-((2 * i) as f64) / d);
            let f = if yarn {
                let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                f / factor * ramp + f * (1.0 - ramp)
            } else {
                f
            };
            f as f32 as f64
        })
        .collect()
}

impl Kernel for Rope {
    fn name(&self) -> &'static str {
        "rope"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 3e-7,
            abs: 1e-6,
            rel: 2.4e-7,
            why: "cos/sin rounded to f32 (2^-25 abs), one product and one FMA rounding: <= 2^-23 (|x0|+|x1|), |x| < 3.5",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let max = MAX_POSITION as usize - 1;
        let mut cases = Vec::new();
        for (rows, heads, head_dim, rope_dim, yarn, inverse, max_pos) in [
            (1, 1, 2, 2, 0, 0, 7),
            (17, 1, 64, 64, 0, 0, 1000),
            (5, 64, 512, 64, 0, 0, max),
            (3, 64, 512, 64, 1, 1, MAX_POSITION as usize),
            (7, 1, 512, 64, 1, 0, 65536),
            (9, 64, 128, 64, 1, 0, max),
            (31, 1, 128, 64, 1, 1, max),
            (4, 3, 67, 6, 0, 1, max),
            (6, 2, 257, 18, 1, 0, 300_000),
            (2, 128, 512, 64, 0, 1, 4096),
        ] {
            cases.push(Case::new(
                rows,
                &[
                    ("heads", heads),
                    ("head_dim", head_dim),
                    ("rope_dim", rope_dim),
                    ("yarn", yarn),
                    ("inverse", inverse),
                    ("max_pos", max_pos),
                ],
            ));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let row_len = case.get("heads") * case.get("head_dim");
        let x: Vec<f32> = (0..case.rows * row_len).map(|_| rng.normal()).collect();
        let max_pos = case.get("max_pos") as u64;
        let pos: Vec<i32> = (0..case.rows)
            .map(|r| if r == 0 { max_pos } else { rng.below(max_pos + 1) } as i32)
            .collect();
        vec![
            Arg::per_row("x", Buf::F32(x), row_len),
            Arg::per_row("pos", Buf::I32(pos), 1),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("heads") * case.get("head_dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (head_dim, rope_dim) = (case.get("head_dim"), case.get("rope_dim"));
        let sign = if case.get("inverse") == 1 { -1.0 } else { 1.0 };
        let freqs = reference_freqs(rope_dim, case.get("yarn") == 1);
        let (x, pos) = (inputs[0].buf.f32(), inputs[1].buf.i32());
        let row_len = x.len() / case.rows;
        let mut y: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        for (row, &p) in y.chunks_mut(row_len).zip(pos) {
            for head in row.chunks_mut(head_dim) {
                let rot = &mut head[head_dim - rope_dim..];
                for (i, &f) in freqs.iter().enumerate() {
                    let angle = p as f64 * f;
                    let (c, s) = (angle.cos(), sign * angle.sin());
                    let (a, b) = (rot[2 * i], rot[2 * i + 1]);
                    rot[2 * i] = a * c - b * s;
                    rot[2 * i + 1] = a * s + b * c;
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
        &["skip_last_row", "position_off_by_one", "angle_f32_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (x, pos, y) = (inputs[0].buf.f32(), inputs[1].buf.i32(), out[0].f32());
        let (head_dim, freqs, inverse) = (case.get("head_dim"), case_freqs(case), case.get("inverse") == 1);
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(x);
                rope(y, pos, head_dim, &freqs, inverse, l, faults);
            }
            Launch::Cuda(c) => {
                rope_cuda(c, x, pos, head_dim, &freqs, inverse, y, faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
