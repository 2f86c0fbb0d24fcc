//! `rms_norm_quant`: `rms_norm` with the act_quant of its output rows made in the same launch, for the FP8 and MXFP4 GEMMs that read them.

mod cpu;
pub mod cuda;

pub(crate) use cpu::round_trip_rows;
pub use cpu::{BLOCK, rms_norm_quant};
pub use cuda::rms_norm_quant_cuda;

use crate::act_quant::{AMAX_FLOOR, QMAX, e4m3_grid, pow2_scale, round_to_grid};
use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;
use crate::rms_norm::RmsNorm;

/// The model's epsilon (`rms_norm`'s contract's).
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

/// DeepSeek's act_quant round trip of rows of `dim` in float64: per 128 values, `s = 2^ceil(log2(amax / 448))` and `e4m3(v / s) * s`.
pub(crate) fn round_trip_reference(values: &[f64], dim: usize) -> Vec<f64> {
    let grid = e4m3_grid();
    let mut out = Vec::with_capacity(values.len());
    for row in values.chunks(dim) {
        for b in row.chunks(BLOCK) {
            let s = pow2_scale(b.iter().fold(AMAX_FLOOR, |m, v| m.max(v.abs())), QMAX);
            out.extend(b.iter().map(|v| round_to_grid((v / s).clamp(-QMAX, QMAX), &grid) * s));
        }
    }
    out
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
        RmsNorm.bound()
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
        let mut cases = RmsNorm.cases();
        cases.extend([Case::new(6, &[("dim", 1024)]), Case::new(1, &[("dim", 4096)])]);
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        RmsNorm.inputs(case, rng)
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
        let y = RmsNorm.reference(case, inputs).swap_remove(0);
        let yq = round_trip_reference(&y, case.get("dim"));
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
