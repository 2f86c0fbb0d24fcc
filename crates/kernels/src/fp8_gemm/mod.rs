//! `fp8_gemm`: `y = act_quant(x) . W^T` with FP8 e4m3 weights and 128x128 e8m0 block scales (wq_a, wq_b, wkv, wo_b, shared experts).

#[cfg(target_arch = "x86_64")]
mod bf16;
mod cpu;
pub mod cuda;
#[cfg(target_arch = "x86_64")]
mod gemv;
#[cfg(target_arch = "x86_64")]
mod packed;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use cpu::{BLOCK, fp8_gemm, one_row_path};
pub(crate) use cpu::{E4M3_BITS, Fp8Weights, LAYOUT};
pub use cuda::{DECODE_ROWS, MAX_K, SMALL_ROWS, fp8_gemm_cuda, quant_blocks, rows_blocks};
#[cfg(target_arch = "x86_64")]
pub use packed::{Packed, fp8_gemm_packed, packs};

use std::sync::OnceLock;

use tensorfold_formats::e4m3;

use crate::contract::rng::Rng;
use crate::contract::{
    Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec, Runs, bf16_runs, controls_here,
};
use crate::faults::Faults;
use crate::gemm::reference::{act_quant_f64, activations, dot_f64, e8m0_f64, fp8_codes, scale_codes};

pub struct Fp8Gemm;

const CONTROLS: [&str; 4] = ["lost_act_scale", "skip_last_column", "order_by_tile", "drop_tail_block"];
/// The BF16 path's and the packed layout's own controls run only where those paths do.
const CONTROLS_OWN: [(&str, Runs); 2] = [("bf16_subnormal_flush", bf16_runs), ("packed_row_swap", packs)];

/// Whether this CPU runs the packed layout's kernel.
#[cfg(not(target_arch = "x86_64"))]
pub fn packs() -> bool {
    false
}

impl Kernel for Fp8Gemm {
    fn name(&self) -> &'static str {
        "fp8_gemm"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 2e-5,
            rel: 2e-5,
            why: "exact FP8 products; f32 rounds 2^-24 of each partial: 8 FMAs a lane, a 4-level tree, K/128 scaled adds",
        }
    }

    fn cases(&self) -> Vec<Case> {
        // (rows, n, k): awkward sizes first (512 rows: a prompt chunk beside decode rows; 130 x 8448: 128-row tiles on 132 SMs), then V4-Flash wq_a, wkv and shared-expert w2, then a long K with a short last block (the long-K rows entry), the longest K (wo_b's) alone and beside prompt tiles.
        [
            (3, 1, 1),
            (17, 31, 257),
            (5, 257, 1031),
            (9, 129, 64),
            (512, 136, 288),
            (130, 8448, 160),
            (2, 1024, 4096),
            (3, 512, 4096),
            (2, 4096, 2048),
            (4, 40, 4200),
            (1, 64, 8192),
            (20, 48, 8192),
            // Whole 16-row groups and 128-blocks, so the packed records pack: one group, and 144 rows over two scale rows.
            (1, 16, 128),
            (17, 144, 384),
        ]
        .into_iter()
        .map(|(rows, n, k)| Case::new(rows, &[("n", n), ("k", k)]))
        .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (n, k) = (case.get("n"), case.get("k"));
        let x = activations(rng, case.rows, k);
        let w = fp8_codes(rng, n * k);
        let s = scale_codes(rng, n.div_ceil(BLOCK) * k.div_ceil(BLOCK), -12);
        vec![
            Arg::per_row("x", Buf::F32(x), k),
            Arg::shared("w", Buf::U8(w)),
            Arg::shared("w_scale", Buf::U8(s)),
        ]
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
        let (x, w, s) = (inputs[0].buf.f32(), inputs[1].buf.u8(), inputs[2].buf.u8());
        let grid_k = k.div_ceil(BLOCK);
        let acts: Vec<Vec<f64>> = x.chunks(k).map(|row| act_quant_f64(row, BLOCK)).collect();
        let mut y = vec![0f64; case.rows * n];
        for c in 0..n {
            let wc: Vec<f64> = (0..k)
                .map(|j| e4m3::decode(w[c * k + j]) as f64 * e8m0_f64(s[c / BLOCK * grid_k + j / BLOCK]))
                .collect();
            for (r, a) in acts.iter().enumerate() {
                y[r * n + c] = dot_f64(a, &wc);
            }
        }
        vec![y]
    }

    /// The CPU records once more with the weights packed, where this CPU runs that kernel.
    fn launches(&self, backend: Backend) -> Vec<Launch> {
        let paths: Vec<_> = packs().then_some(crate::cpu::SimdPath::best()).into_iter().collect();
        crate::contract::records_packed(backend, self.cuda(), &paths)
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        static ON: OnceLock<Vec<&'static str>> = OnceLock::new();
        ON.get_or_init(|| controls_here(&CONTROLS, &CONTROLS_OWN))
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (n, k) = (case.get("n"), case.get("k"));
        let (x, w, s) = (inputs[0].buf.f32(), inputs[1].buf.u8(), inputs[2].buf.u8());
        match launch {
            #[cfg(target_arch = "x86_64")]
            Launch::Cpu(l) if l.packed => match Packed::planted(w, s, n, k, faults) {
                Some(p) => fp8_gemm_packed(x, &p, out[0].f32(), l, faults),
                None => fp8_gemm(x, w, s, n, k, out[0].f32(), l, faults),
            },
            Launch::Cpu(l) => fp8_gemm(x, w, s, n, k, out[0].f32(), l, faults),
            Launch::Cuda(c) => fp8_gemm_cuda(c, x, w, s, n, k, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
