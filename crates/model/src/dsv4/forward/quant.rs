//! Rows act_quant'ed on the GPU by the launch that norms them, read by every FP8 and MXFP4 GEMM that takes them.

use cudarc::driver::CudaSlice;
use tensorfold_kernels::cuda::{Out, Quantised};
use tensorfold_kernels::fp8_gemm as f8;
use tensorfold_kernels::rms_norm_quant as rq;
use tensorfold_kernels::swiglu_quant as sq;

use super::act::Act;
use super::device::{CudaDevice, ok, record};
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

    /// The codes and scales as a kernel's outputs for rows of `dim`.
    fn outputs(&mut self, dim: usize) -> (Out<'_, u16>, Out<'_, f32>) {
        let (qn, sn) = (self.rows * dim.next_multiple_of(8), self.rows * dim.div_ceil(128));
        (Out::Dev(self.q.slice_mut(..qn)), Out::Dev(self.scales.slice_mut(..sn)))
    }
}

/// Codes and scales for `rows` act_quant'ed rows of `dim`, the codes' padding past `dim` cleared.
fn alloc(c: &CudaDevice, rows: usize, dim: usize) -> Quant {
    fn fail<T>(e: String) -> T {
        panic!("allocating on CUDA failed: {e}")
    }
    // Padding past `dim` reads as zeros in the GEMMs, so a row width off a multiple of 8 starts cleared.
    let q = if dim.is_multiple_of(8) {
        c.gpu.scratch::<u16>(rows * dim)
    } else {
        c.gpu.zeros::<u16>(rows * dim.next_multiple_of(8))
    }
    .unwrap_or_else(fail);
    let scales = c.gpu.scratch::<f32>(rows * dim.div_ceil(128)).unwrap_or_else(fail);
    Quant { q, scales, rows }
}

/// The pass's GPU where its GEMMs act_quant their inputs.
fn quantising<'a>(pass: &'a Pass<'_>) -> Option<&'a CudaDevice> {
    pass.device
        .cuda()
        .filter(|_| pass.model.semantics.act_quant_gemm_inputs)
}

/// `rms_norm` of `x` into `out`; on a GPU pass whose GEMMs act_quant their inputs, `out`'s act_quant too, from the same launch.
pub(crate) fn rms_norm(pass: &Pass<'_>, x: &Act, weight: &[f32], out: &mut Act) -> Option<Quant> {
    let Some(c) = quantising(pass) else {
        ops::rms_norm(&pass.device, x, weight, pass.eps(), out);
        return None;
    };
    let dim = weight.len();
    let mut quant = alloc(c, x.len() / dim, dim);
    let w = c
        .resident
        .get(c.gpu, weight)
        .unwrap_or_else(|e| panic!("uploading a weight to the GPU failed: {e}"));
    let (q, scales) = quant.outputs(dim);
    let k = record(&rq::cuda::KERNEL);
    let r = rq::rms_norm_quant_cuda(k, x.input(), &*w, pass.eps(), out.output(), q, scales, ops::F);
    ok("rms_norm_quant", r);
    Some(quant)
}

/// `swiglu` of `gate` and `up` with a route weight a row into `out`; on a GPU pass whose GEMMs act_quant their inputs, `out`'s act_quant too, from the same launch.
pub(crate) fn swiglu(pass: &Pass<'_>, gate: &Act, up: &Act, route: &Act, limit: f32, out: &mut Act) -> Option<Quant> {
    let Some(c) = quantising(pass) else {
        ops::swiglu(&pass.device, gate, up, route, limit, out);
        return None;
    };
    let dim = gate.len() / route.len().max(1);
    let mut quant = alloc(c, route.len(), dim);
    let (q, scales) = quant.outputs(dim);
    let k = record(&sq::cuda::KERNEL);
    let r = sq::swiglu_quant_cuda(
        k,
        gate.input(),
        up.input(),
        route.input(),
        limit,
        out.output(),
        q,
        scales,
        ops::F,
    );
    ok("swiglu_quant", r);
    Some(quant)
}

/// Rows `qt` times each of `ws` (one input width) into `outs` on the GPU, the weights resident there.
fn gemms(c: &CudaDevice, qt: &Quant, ws: &[&Fp8], outs: Vec<&mut Act>) {
    let k = ws.first().map_or(0, |w| w.in_dim);
    assert!(ws.iter().all(|w| w.in_dim == k), "fp8 weights of one input width");
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
        .zip(outs)
        .map(|(((wd, sd), w), out)| ((&**wd).into(), (&**sd).into(), w.out_dim, out.output()))
        .collect();
    let r = f8::cuda::fp8_gemms_quantised_cuda(record(&f8::cuda::KERNEL), qt.view(), weights, k, ops::F);
    ok("fp8_gemm", r);
}

/// `linear::fp8_into` reading `quant`, x's act_quant, where there is one.
pub(crate) fn fp8_into(pass: &Pass<'_>, x: &Act, quant: Option<&Quant>, w: &Fp8, out: &mut Act) {
    match (quant, pass.device.cuda()) {
        (Some(qt), Some(c)) => gemms(c, qt, &[w], vec![out]),
        _ => linear::fp8_into(pass, x, w, out),
    }
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
    let mut outs: Vec<Act> = ws.iter().map(|w| pass.device.alloc(qt.rows * w.out_dim)).collect();
    gemms(c, qt, ws, outs.iter_mut().collect());
    outs
}
