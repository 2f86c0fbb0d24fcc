//! `engram_gate`: DeepSeek V4.1 Engram's context gate, each residual stream plus its sigmoid gate times the retrieved value.

mod cpu;
mod cuda;

pub use cpu::engram_gate;
pub use cuda::engram_gate_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// V4.1's rms_norm_eps.
const EPS: f32 = 1e-20;

pub struct EngramGate;

impl Kernel for EngramGate {
    fn name(&self) -> &'static str {
        "engram_gate"
    }

    fn family(&self) -> &'static str {
        "dsv41"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-6,
            abs: 1e-6,
            rel: 1e-6,
            why: "the gate from f64 sums rounded once to f32 (2^-24), then one f32 FMA: below an ulp of |x| + |gate v|",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, hc, dim) in [
            (1, 4, 1),
            (17, 4, 31),
            (5, 4, 128),
            (31, 1, 257),
            (3, 4, 5120),
            (4, 2, 4099),
        ] {
            cases.push(Case::new(rows, &[("hc", hc), ("dim", dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let n = case.rows * hc * dim;
        let x: Vec<f32> = (0..n).map(|_| 3.0 * rng.normal()).collect();
        // Keys aligned with x on some rows push |d| far from the floor; row 0 has zero keys (d at the floor).
        let keys: Vec<f32> = (0..n)
            .map(|i| match i / (hc * dim) {
                0 => 0.0,
                1 => x[i] * 2.0,
                _ => rng.normal(),
            })
            .collect();
        let v: Vec<f32> = (0..case.rows * dim).map(|_| 2.0 * rng.normal()).collect();
        let w = |rng: &mut Rng| -> Vec<f32> { (0..hc * dim).map(|_| 1.0 + 0.1 * rng.normal()).collect() };
        let (qw, kw) = (w(rng), w(rng));
        vec![
            Arg::per_row("x", Buf::F32(x), hc * dim),
            Arg::per_row("keys", Buf::F32(keys), hc * dim),
            Arg::per_row("v", Buf::F32(v), dim),
            Arg::shared("q_weight", Buf::F32(qw)),
            Arg::shared("k_weight", Buf::F32(kw)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "x",
            kind: OutKind::F32,
            row_len: case.get("hc") * case.get("dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (hc, dim) = (case.get("hc"), case.get("dim"));
        let f64s = |a: &Arg| a.buf.f32().iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let (x, keys, v, qw, kw) = (
            f64s(&inputs[0]),
            f64s(&inputs[1]),
            f64s(&inputs[2]),
            f64s(&inputs[3]),
            f64s(&inputs[4]),
        );
        let rms = |s: &[f64]| 1.0 / (s.iter().map(|a| a * a).sum::<f64>() / dim as f64 + EPS as f64).sqrt();
        let mut y = Vec::with_capacity(x.len());
        for r in 0..case.rows {
            for s in 0..hc {
                let at = |t: &[f64]| t[(r * hc + s) * dim..(r * hc + s + 1) * dim].to_vec();
                let (xs, ks) = (at(&x), at(&keys));
                let dot: f64 = (0..dim)
                    .map(|j| xs[j] * qw[s * dim + j] * kw[s * dim + j] * ks[j])
                    .sum();
                let d = dot * rms(&xs) * rms(&ks) / (dim as f64).sqrt();
                let sign = if d == 0.0 { 0.0 } else { d.signum() };
                let gate = 1.0 / (1.0 + (-(sign * d.abs().max(1e-6).sqrt())).exp());
                y.extend((0..dim).map(|j| xs[j] + gate * v[r * dim + j]));
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
        &["no_key_norm", "unsigned_gate", "first_stream_gate"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let y = out[0].f32();
        let (x, keys, v, qw, kw) = (
            inputs[0].buf.f32(),
            inputs[1].buf.f32(),
            inputs[2].buf.f32(),
            inputs[3].buf.f32(),
            inputs[4].buf.f32(),
        );
        match launch {
            Launch::Cpu(l) => {
                y.copy_from_slice(x);
                engram_gate(y, keys, v, qw, kw, case.get("hc"), EPS, l, faults);
            }
            Launch::Cuda(c) => engram_gate_cuda(c, x, keys, v, qw, kw, case.get("hc"), EPS, y, faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
