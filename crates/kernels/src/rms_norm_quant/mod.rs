//! `rms_norm_quant`: `rms_norm` with the act_quant of its output rows made in the same launch, for the FP8 and MXFP4 GEMMs that read them.

mod cpu;
pub mod cuda;

pub(crate) use cpu::round_trip_rows;
pub use cpu::{BLOCK, rms_norm_quant};
pub use cuda::rms_norm_quant_cuda;

use crate::act_quant::{AMAX_FLOOR, QMAX, e4m3_grid, pow2_scale, round_to_grid};
use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's epsilon.
const EPS: f32 = 1e-6;

/// The f32 value of f16 bits (exact).
fn f16_value(h: u16) -> f32 {
    let (sign, exp, man) = ((h >> 15) as u32, ((h >> 10) & 31) as i32, (h & 1023) as f32);
    let v = match exp {
        0 => man * 2f32.powi(-24),
        31 if man == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + man / 1024.0) * 2f32.powi(e - 15),
    };
    if sign == 1 { -v } else { v }
}

/// The round trip `q * s` of quantised rows: `q` f16 grid values with row stride `dim` rounded up to 8, `q_scale` one scale per 128 values.
pub fn dequantised(q: &[u16], q_scale: &[f32], dim: usize) -> Vec<f32> {
    let (kp, nblk) = (dim.next_multiple_of(8), dim.div_ceil(BLOCK));
    let rows = q_scale.len() / nblk;
    (0..rows * dim)
        .map(|i| {
            let (r, c) = (i / dim, i % dim);
            f16_value(q[r * kp + c]) * q_scale[r * nblk + c / BLOCK]
        })
        .collect()
}

pub struct RmsNormQuant;

impl Kernel for RmsNormQuant {
    fn name(&self) -> &'static str {
        "rms_norm_quant"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 1e-6,
            rel: 4e-6,
            why: "rms_norm's: f32 sum of squares in fixed lanes, one sqrt, one divide and two multiplies; yq states its own",
        }
    }

    fn output_bound(&self, name: &str) -> Bound {
        match name {
            "yq" => Bound {
                rel_norm: 0.04,
                abs: 4e-5,
                rel: 0.0626,
                why: "half an e4m3 step (2^-4 relative; 2^-10 s below the normals, s <= 2^-5 here) over y's few ulp",
            },
            _ => self.bound(),
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, dim) in [
            (1, 1),
            (17, 31),
            (5, 257),
            (31, 128),
            (3, 4096),
            (2, 7168),
            (6, 1024),
            (1, 4096),
        ] {
            cases.push(Case::new(rows, &[("dim", dim)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let dim = case.get("dim");
        let x: Vec<f32> = (0..case.rows * dim).map(|_| 3.0 * rng.normal()).collect();
        let w: Vec<f32> = (0..dim).map(|_| 1.0 + 0.1 * rng.normal()).collect();
        vec![Arg::per_row("x", Buf::F32(x), dim), Arg::shared("weight", Buf::F32(w))]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        let out = |name| OutSpec {
            name,
            kind: OutKind::F32,
            row_len: case.get("dim"),
        };
        vec![out("y"), out("yq")]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let dim = case.get("dim");
        let (x, w) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let grid = e4m3_grid();
        let (mut y, mut yq) = (Vec::with_capacity(x.len()), Vec::with_capacity(x.len()));
        for row in x.chunks(dim) {
            let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / dim as f64;
            let r = 1.0 / (ms + EPS as f64).sqrt();
            let normed: Vec<f64> = row.iter().zip(w).map(|(&v, &g)| v as f64 * r * g as f64).collect();
            for b in normed.chunks(BLOCK) {
                let s = pow2_scale(b.iter().fold(AMAX_FLOOR, |m, v| m.max(v.abs())), QMAX);
                yq.extend(b.iter().map(|v| round_to_grid((v / s).clamp(-QMAX, QMAX), &grid) * s));
            }
            y.extend(normed);
        }
        vec![y, yq]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "lost_act_scale", "drop_last_element"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let [y, yq] = out else {
            panic!("rms_norm_quant has two outputs")
        };
        let (x, w) = (inputs[0].buf.f32(), inputs[1].buf.f32());
        let dim = case.get("dim");
        match launch {
            Launch::Cpu(l) => rms_norm_quant(x, w, EPS, y.f32(), yq.f32(), l, faults),
            Launch::Cuda(c) => {
                // Codes poisoned as f16 NaN and scales as NaN, so a code or scale never written shows in yq.
                let mut q = vec![0x7e00u16; case.rows * dim.next_multiple_of(8)];
                let mut scales = vec![f32::NAN; case.rows * dim.div_ceil(BLOCK)];
                rms_norm_quant_cuda(c, x, w, EPS, y.f32(), &mut q, &mut scales, faults)
                    .unwrap_or_else(|e| panic!("{e}"));
                yq.f32().copy_from_slice(&dequantised(&q, &scales, dim));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{dequantised, f16_value};

    #[test]
    fn f16_bits_decode_exactly_and_rows_scale_by_their_blocks() {
        for (h, v) in [
            (0x3c00u16, 1.0f32),
            (0xc000, -2.0),
            (0x0001, 2f32.powi(-24)),
            (0x7bff, 65504.0),
            (0x3800, 0.5),
            (0x0000, 0.0),
        ] {
            assert_eq!(f16_value(h).to_bits(), v.to_bits(), "{h:#06x}");
        }
        assert!(f16_value(0x7e00).is_nan());
        // Two rows of 130 (stride 136): the second block of each row takes its own scale.
        let mut q = vec![0u16; 2 * 136];
        q[0] = 0x3c00;
        q[129] = 0x4000;
        q[136 + 128] = 0xbc00;
        let got = dequantised(&q, &[0.5, 4.0, 2.0, 8.0], 130);
        assert_eq!((got[0], got[129], got[130 + 128]), (0.5, 8.0, -8.0));
        assert_eq!(got.len(), 260);
    }
}
