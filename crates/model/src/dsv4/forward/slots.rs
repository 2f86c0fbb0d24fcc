//! Decode-sized MoE on the GPU: every routed slot's expert in one launch per matrix, the router's choices never leaving the device.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use tensorfold_kernels::fp8_gemm::DECODE_ROWS;
use tensorfold_kernels::mxfp4_gemm as m4;

use super::act::Act;
use super::device::{CudaDevice, ok, record};
use super::quant::{self, Quant};
use super::{Pass, ops};
use crate::dsv4::weights::{Expert, Moe, Mxfp4};

/// Which expert matrix a table addresses.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Matrix {
    W1,
    W3,
    W2,
}

/// Whether this pass's MoE runs by slot: on one GPU, official semantics, at most 16 rows.
pub(crate) fn by_slot(pass: &Pass<'_>) -> bool {
    pass.device.cuda().is_some()
        && pass.ranks.is_none()
        && pass.model.semantics.act_quant_gemm_inputs
        && pass.rows() <= DECODE_ROWS
}

/// The device addresses of every expert's `which` matrix: weights at entry 2e, scales at 2e + 1; built once per layer.
fn table(c: &CudaDevice, w: &Moe, which: Matrix) -> Arc<CudaSlice<u64>> {
    let key = (w as *const Moe as usize, which);
    let mut tables = c.tables.lock().expect("expert tables poisoned");
    if let Some(t) = tables.get(&key) {
        return t.clone();
    }
    let mut addrs = Vec::with_capacity(2 * w.experts.len());
    for e in &w.experts {
        let m = pick(e, which);
        for host in [&m.packed[..], &m.scales[..]] {
            let d = c
                .resident
                .get(c.gpu, host)
                .unwrap_or_else(|e| panic!("uploading a weight to the GPU failed: {e}"));
            addrs.push(d.device_ptr(&c.gpu.stream).0);
        }
    }
    let t = Arc::new(
        c.gpu
            .upload(&addrs)
            .unwrap_or_else(|e| panic!("uploading an expert table to the GPU failed: {e}")),
    );
    tables.insert(key, t.clone());
    t
}

fn pick(e: &Expert, which: Matrix) -> &Mxfp4 {
    match which {
        Matrix::W1 => &e.w1,
        Matrix::W3 => &e.w3,
        Matrix::W2 => &e.w2,
    }
}

/// Routed slot `s`'s expert matrices `which` (one launch) on row `s / per_row` of `x` (`quant` its act_quant where made), each into rows `s` of `[slots, n]`.
#[allow(clippy::too_many_arguments)]
fn slots(
    pass: &Pass<'_>,
    w: &Moe,
    which: &[Matrix],
    x: &Act,
    quant: Option<&Quant>,
    idx: &Act<i32>,
    per_row: usize,
    m: &Mxfp4,
) -> Vec<Act> {
    let c = pass.device.cuda().expect("slots run on the GPU");
    let tables: Vec<_> = which.iter().map(|&m| table(c, w, m)).collect();
    let mut outs: Vec<Act> = which.iter().map(|_| pass.device.zeros(idx.len() * m.out_dim)).collect();
    let r = record(&m4::cuda::KERNEL);
    let refs: Vec<&CudaSlice<u64>> = tables.iter().map(|t| &**t).collect();
    let views = outs.iter_mut().map(|o| o.output()).collect();
    let (n, k) = (m.out_dim, m.in_dim);
    let res = match quant {
        Some(q) => m4::mxfp4_gemm_slots_quantised_cuda(r, q.view(), &refs, idx.input(), per_row, n, k, views, ops::F),
        None => m4::mxfp4_gemm_slots_cuda(r, x.input(), &refs, idx.input(), per_row, n, k, views, ops::F),
    };
    ok("mxfp4_gemm", res);
    outs
}

/// The routed experts' outputs `[rows * k, D]` in slot order, from the router's device `idx` and `weights` (`quant` x's act_quant where made).
pub(crate) fn routed(pass: &Pass<'_>, w: &Moe, x: &Act, quant: Option<&Quant>, idx: &Act<i32>, weights: &Act) -> Act {
    let c = &pass.model.config;
    let first = w.experts.first().expect("a routed MoE has experts");
    let k = c.num_experts_per_tok;
    let mut gu = slots(pass, w, &[Matrix::W1, Matrix::W3], x, quant, idx, k, &first.w1);
    let (u, g) = (gu.pop().expect("w3 output"), gu.pop().expect("w1 output"));
    let mut h = pass.device.alloc(g.len());
    let hq = quant::swiglu(pass, &g, &u, weights, c.swiglu_limit as f32, &mut h);
    slots(pass, w, &[Matrix::W2], &h, hq.as_ref(), idx, 1, &first.w2)
        .pop()
        .expect("w2 output")
}

/// Whether this pass's grouped routed experts run each matrix in one launch over every expert's rows: on one GPU, official semantics.
pub(crate) fn grouped_on_gpu(pass: &Pass<'_>) -> bool {
    pass.device.cuda().is_some() && pass.ranks.is_none() && pass.model.semantics.act_quant_gemm_inputs
}

/// The routed experts on rows `xs` `[rows, D]` in expert order (`spans[e]`: expert e's first row and rows) with route weights `route`, `[rows, D]`: each matrix one launch over every expert's row groups.
pub(crate) fn grouped(pass: &Pass<'_>, w: &Moe, xs: &Act, route: &Act, spans: &[(usize, usize)]) -> Act {
    let c = pass.device.cuda().expect("grouped experts run on the GPU");
    let first = w.experts.first().expect("a routed MoE has experts");
    let g_rows = m4::GROUP_ROWS;
    let groups: Vec<[i32; 3]> = spans
        .iter()
        .enumerate()
        .flat_map(|(e, &(at, len))| {
            (0..len)
                .step_by(g_rows)
                .map(move |j| [e as i32, (at + j) as i32, (len - j).min(g_rows) as i32])
        })
        .collect();
    let rows = route.len();
    let r = record(&m4::cuda::KERNEL);
    // One act_quant of the rows for w1 and w3.
    let xq = m4::cuda::mxfp4_quantise_cuda(r, xs.input(), first.w1.in_dim, ops::F);
    let xq = xq.unwrap_or_else(|e| panic!("mxfp4_gemm_quant on CUDA failed: {e}"));
    let mut gu = [(Matrix::W1, &first.w1), (Matrix::W3, &first.w3)].map(|(which, m)| {
        let mut out = pass.device.zeros(rows * m.out_dim);
        let (t, n, k) = (table(c, w, which), m.out_dim, m.in_dim);
        let res = m4::cuda::mxfp4_gemm_grouped_cuda(r, xq.view(), &t, &groups, n, k, out.output(), ops::F);
        ok("mxfp4_gemm", res);
        out
    });
    let [g, u] = &mut gu;
    let mut h = pass.device.alloc(g.len());
    let limit = pass.model.config.swiglu_limit as f32;
    let hq = quant::swiglu(pass, g, u, route, limit, &mut h).expect("a quantising GPU pass act_quants h");
    let mut y = pass.device.zeros(rows * first.w2.out_dim);
    let (t, n, k) = (table(c, w, Matrix::W2), first.w2.out_dim, first.w2.in_dim);
    let res = m4::cuda::mxfp4_gemm_grouped_cuda(r, hq.view(), &t, &groups, n, k, y.output(), ops::F);
    ok("mxfp4_gemm", res);
    y
}
