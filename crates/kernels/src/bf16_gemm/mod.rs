//! `bf16_gemm`: `y = x . W^T`, bf16 weights, f32 activations (compressor, router gate, indexer weights_proj, vocab head).

mod cpu;
pub mod cuda;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use cpu::bf16_gemm;
pub use cuda::bf16_gemm_cuda;

use std::borrow::Cow;

use tensorfold_formats::bf16;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;
use crate::gemm::reference::{activations, dot_f64};

pub struct Bf16Gemm;

/// bf16 values from little-endian byte pairs, borrowed when aligned.
fn words(bytes: &[u8]) -> Cow<'_, [u16]> {
    // SAFETY: every bit pattern is a valid u16.
    let (head, mid, tail) = unsafe { bytes.align_to::<u16>() };
    if head.is_empty() && tail.is_empty() && cfg!(target_endian = "little") {
        Cow::Borrowed(mid)
    } else {
        Cow::Owned(
            bytes
                .chunks_exact(2)
                .map(|p| u16::from_le_bytes([p[0], p[1]]))
                .collect(),
        )
    }
}

impl Kernel for Bf16Gemm {
    fn name(&self) -> &'static str {
        "bf16_gemm"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 4e-6,
            abs: 3e-5,
            rel: 3e-5,
            why: "exact bf16 x f32 inputs; f32 rounds 2^-24 of each partial: K/16 FMAs a lane and a 4-level tree",
        }
    }

    fn cases(&self) -> Vec<Case> {
        // Awkward sizes (512 rows: a prompt chunk beside decode rows); router gate; compressor wkv; indexer weights_proj; the vocab head's 129280 columns at a short K; 18 rows of many columns (tiles whole, decode rows a warp per 16 columns); 12 rows of many columns with a K tail (the decode rows' ring with x as A).
        [
            (3, 1, 1),
            (17, 31, 257),
            (5, 37, 1031),
            (512, 136, 264),
            (4, 256, 4096),
            (2, 1024, 4096),
            (3, 64, 4096),
            (2, 129_280, 48),
            (18, 16_400, 40),
            (12, 16_400, 72),
        ]
        .into_iter()
        .map(|(rows, n, k)| Case::new(rows, &[("n", n), ("k", k)]))
        .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (n, k) = (case.get("n"), case.get("k"));
        let x = activations(rng, case.rows, k);
        let w: Vec<u8> = (0..n * k)
            .flat_map(|_| bf16::f32_to_bf16(0.03 * rng.normal()).to_le_bytes())
            .collect();
        vec![Arg::per_row("x", Buf::F32(x), k), Arg::shared("w", Buf::U8(w))]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("n"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (n, k) = (case.get("n"), case.get("k"));
        let x = inputs[0].buf.f32();
        let w = words(inputs[1].buf.u8());
        let wf: Vec<f64> = w.iter().map(|&b| bf16::bf16_to_f32(b) as f64).collect();
        let mut y = Vec::with_capacity(case.rows * n);
        for row in x.chunks(k) {
            let a: Vec<f64> = row.iter().map(|&v| v as f64).collect();
            y.extend(wf.chunks(k).map(|wr| dot_f64(&a, wr)));
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
        &["drop_tail", "skip_last_row", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (n, k) = (case.get("n"), case.get("k"));
        let (x, w) = (inputs[0].buf.f32(), words(inputs[1].buf.u8()));
        match launch {
            Launch::Cpu(l) => bf16_gemm(x, &w, n, k, out[0].f32(), l, faults),
            Launch::Cuda(c) => bf16_gemm_cuda(c, x, &*w, n, k, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
