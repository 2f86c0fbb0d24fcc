//! Rows act_quant'ed on the GPU by the launch that norms them, read by every FP8 and MXFP4 GEMM that takes them.

use cudarc::driver::CudaSlice;
use tensorfold_kernels::cuda::{Out, Quantised};
use tensorfold_kernels::fp8_gemm as f8;
use tensorfold_kernels::rms_norm_quant as rq;

use super::act::Act;
use super::device::{ok, record};
use super::{Pass, linear, ops};
use crate::dsv4::weights::Fp8;

/// Rows act_quant'ed on the GPU: f16 e4m3 grid values (row stride K rounded up to 8) and a scale per 128 values of a row.
pub(crate) struct Quant {
    q: CudaSlice<u16>,
    scales: CudaSlice<f32>,
    rows: usize,
}

impl Quant {
    /// The rows as a quantising GEMM's input.
    pub(crate) fn view(&self) -> Quantised<'_> {
        Quantised {
            q: (&self.q).into(),
            scales: (&self.scales).into(),
            rows: self.rows,
        }
    }
}

/// `rms_norm` of `x` into `out`; on a GPU pass whose GEMMs act_quant their inputs, `out`'s act_quant too, from the same launch.
pub(crate) fn rms_norm(pass: &Pass<'_>, x: &Act, weight: &[f32], out: &mut Act) -> Option<Quant> {
    let dev = &pass.device;
    let Some(c) = dev.cuda().filter(|_| pass.model.semantics.act_quant_gemm_inputs) else {
        ops::rms_norm(dev, x, weight, pass.eps(), out);
        return None;
    };
    let dim = weight.len();
    let rows = x.len() / dim;
    fn fail<T>(e: String) -> T {
        panic!("allocating on CUDA failed: {e}")
    }
    // Padding past `dim` reads as zeros in the GEMMs, so a row width off a multiple of 8 starts cleared.
    let mut q = if dim.is_multiple_of(8) {
        c.gpu.scratch::<u16>(rows * dim)
    } else {
        c.gpu.zeros::<u16>(rows * dim.next_multiple_of(8))
    }
    .unwrap_or_else(fail);
    let mut scales = c.gpu.scratch::<f32>(rows * dim.div_ceil(128)).unwrap_or_else(fail);
    let w = c
        .resident
        .get(c.gpu, weight)
        .unwrap_or_else(|e| panic!("uploading a weight to the GPU failed: {e}"));
    let (qn, sn) = (rows * dim.next_multiple_of(8), rows * dim.div_ceil(128));
    let r = rq::rms_norm_quant_cuda(
        record(&rq::cuda::KERNEL),
        x.input(),
        &*w,
        pass.eps(),
        out.output(),
        Out::Dev(q.slice_mut(..qn)),
        Out::Dev(scales.slice_mut(..sn)),
        ops::F,
    );
    ok("rms_norm_quant", r);
    Some(Quant { q, scales, rows })
}

/// `x` times each of `ws` (one input width), reading `quant`, x's act_quant, where there is one; else as `linear::fp8` and `linear::fp8_pair`.
pub(crate) fn fp8(pass: &Pass<'_>, x: &Act, quant: Option<&Quant>, ws: &[&Fp8]) -> Vec<Act> {
    let (Some(qt), Some(c)) = (quant, pass.device.cuda()) else {
        return match ws {
            [a, b] => {
                let (ya, yb) = linear::fp8_pair(pass, x, a, b);
                vec![ya, yb]
            }
            _ => ws.iter().map(|w| linear::fp8(pass, x, w)).collect(),
        };
    };
    let k = ws.first().map_or(0, |w| w.in_dim);
    assert!(ws.iter().all(|w| w.in_dim == k), "fp8 weights of one input width");
    let mut outs: Vec<Act> = ws.iter().map(|w| pass.device.alloc(qt.rows * w.out_dim)).collect();
    let fail = |e: String| panic!("uploading a weight to the GPU failed: {e}");
    let held: Vec<_> = ws
        .iter()
        .map(|w| {
            let codes = c.resident.get(c.gpu, &w.codes).unwrap_or_else(fail);
            (codes, c.resident.get(c.gpu, &w.scales).unwrap_or_else(fail))
        })
        .collect();
    let weights = held
        .iter()
        .zip(ws)
        .zip(outs.iter_mut())
        .map(|(((wd, sd), w), out)| ((&**wd).into(), (&**sd).into(), w.out_dim, out.output()))
        .collect();
    let r = f8::cuda::fp8_gemms_quantised_cuda(record(&f8::cuda::KERNEL), qt.view(), weights, k, ops::F);
    ok("fp8_gemm", r);
    outs
}
