//! `mxfp4_gemm`: routed-expert GEMM, `y = act_quant(x) . W^T` with MXFP4 weights (w1, w2, w3 of every routed expert).

#[cfg(target_arch = "x86_64")]
mod bf16;
mod cpu;
pub mod cuda;
#[cfg(target_arch = "x86_64")]
mod exact;
#[cfg(target_arch = "x86_64")]
mod exact2;
#[cfg(target_arch = "x86_64")]
mod gemv;
mod grouped;
#[cfg(target_arch = "x86_64")]
mod packed;
#[cfg(target_arch = "x86_64")]
mod packed2;
mod slots;
#[cfg(all(test, target_arch = "x86_64"))]
mod testdata;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use cpu::{BLOCK, mxfp4_gemm, one_row_path};
pub use cuda::{
    GROUP_ROWS, mxfp4_gemm_cuda, mxfp4_gemm_grouped_cuda, mxfp4_gemm_slots_cuda, mxfp4_gemm_slots_quantised_cuda,
};
#[cfg(target_arch = "x86_64")]
pub use packed::{Packed, mxfp4_gemm_packed, packed_paths, packs};

use std::sync::OnceLock;

use tensorfold_formats::e2m1;

use crate::contract::rng::Rng;
use crate::contract::{
    Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec, Runs, bf16_runs, controls_here,
};
use crate::faults::Faults;
use crate::fp8_gemm::DECODE_ROWS;
use crate::gemm::act::ACT_BLOCK;
use crate::gemm::reference::{act_quant_f64, activations, dot_f64, e8m0_f64, scale_codes_within};

pub struct Mxfp4Gemm;

const CONTROLS: [&str; 4] = ["swap_nibbles", "lost_act_scale", "order_by_tile", "skip_last_column"];
/// The BF16 path's and the packed layout's own controls run only where those paths do.
const CONTROLS_OWN: [(&str, Runs); 2] = [("bf16_pair_swap", bf16_runs), ("packed_row_swap", packs)];

/// Whether this CPU runs the packed layout's kernel.
#[cfg(not(target_arch = "x86_64"))]
pub fn packs() -> bool {
    false
}

/// The paths whose launches run a packed form here: none.
#[cfg(not(target_arch = "x86_64"))]
pub fn packed_paths() -> Vec<crate::cpu::SimdPath> {
    Vec::new()
}

/// Packed MXFP4 weights, which only x86-64 CPUs with AVX2 make: none exist here.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Debug)]
pub enum Packed {}

#[cfg(not(target_arch = "x86_64"))]
impl Packed {
    /// Never packs on this architecture.
    pub fn new(_: &[u8], _: &[u8], _: usize, _: usize) -> Option<Packed> {
        None
    }

    /// Bytes held.
    pub fn parts(&self) -> [&[u8]; 2] {
        match *self {}
    }
}

/// `mxfp4_gemm` against packed weights, which cannot exist on this architecture.
#[cfg(not(target_arch = "x86_64"))]
pub fn mxfp4_gemm_packed(_: &[f32], p: &Packed, _: &mut [f32], _: &CpuLaunch, _: Faults) {
    match *p {}
}

impl Kernel for Mxfp4Gemm {
    fn name(&self) -> &'static str {
        "mxfp4_gemm"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 2e-5,
            rel: 2e-5,
            why: "exact e4m3 x e2m1 products; f32 rounds 2^-24 of each partial: CPU 8 FMAs a lane, 2 adds, K/32 scaled adds; CUDA 8 k16 steps, K/128 scaled adds",
        }
    }

    fn cases(&self) -> Vec<Case> {
        // (rows, n, k): awkward sizes (k a multiple of 32; 512 rows: a prompt chunk beside decode rows; 130 x 8448: 128-row tiles on 132 SMs), then V4-Flash w1/w3 [2048, 4096] and w2 [4096, 2048].
        [
            (3, 1, 32),
            (17, 31, 96),
            (6, 257, 1056),
            (9, 33, 160),
            (512, 136, 288),
            (130, 8448, 160),
            (2, 2048, 4096),
            (2, 4096, 2048),
        ]
        .into_iter()
        .map(|(rows, n, k)| Case::new(rows, &[("n", n), ("k", k)]))
        // Scales 2^-3..2^3 (`scale_lift` 8 above the usual 2^-8 centre); scales 22 steps apart in one 128-block (`scale_spread` 11), whose smallest enter CUDA's f16 weights as subnormals.
        .chain([Case::new(40, &[("n", 200), ("k", 256), ("scale_lift", 8)])])
        // Whole 16-row groups and 128-chunks, so the packed records pack: one group, and three groups with scales 22 steps apart.
        .chain(
            [(1, 16, 128, 3), (17, 48, 384, 11)]
                .map(|(rows, n, k, spread)| Case::new(rows, &[("n", n), ("k", k), ("scale_spread", spread)])),
        )
        .chain(
            [(24, 136, 512), (5, 40, 512)]
                .map(|(rows, n, k)| Case::new(rows, &[("n", n), ("k", k), ("scale_spread", 11)])),
        )
        // On CUDA, cases marked `slots` run batches of up to 16 rows as routed slots through an expert table (slots.rs).
        .chain(
            [(17, 31, 96), (3, 257, 1056), (2, 4096, 2048)]
                .map(|(rows, n, k)| Case::new(rows, &[("n", n), ("k", k), ("slots", 1)])),
        )
        .chain([Case::new(
            5,
            &[("n", 40), ("k", 512), ("scale_spread", 11), ("slots", 1)],
        )])
        // On CUDA, cases marked `grouped` run batches of more than 16 rows as row groups through an expert table (grouped.rs).
        .chain(
            [(130, 136, 512), (300, 257, 1056), (70, 512, 4096)]
                .map(|(rows, n, k)| Case::new(rows, &[("n", n), ("k", k), ("grouped", 1)])),
        )
        .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (n, k) = (case.get("n"), case.get("k"));
        let x = activations(rng, case.rows, k);
        let mut w = Vec::with_capacity(n * k / 2 + 8);
        while w.len() < n * k / 2 {
            w.extend(rng.next_u64().to_le_bytes());
        }
        w.truncate(n * k / 2);
        let lift = case.opt("scale_lift").unwrap_or(0) as i32;
        let spread = case.opt("scale_spread").unwrap_or(3) as u64;
        let s = scale_codes_within(rng, n * k / BLOCK, lift - 8, spread);
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
        let acts: Vec<Vec<f64>> = x.chunks(k).map(|row| act_quant_f64(row, ACT_BLOCK)).collect();
        let mut y = vec![0f64; case.rows * n];
        for c in 0..n {
            let wc: Vec<f64> = (0..k)
                .map(|j| {
                    let byte = w[(c * k + j) / 2];
                    let nibble = if j % 2 == 0 { byte & 0xF } else { byte >> 4 };
                    e2m1::decode(nibble) as f64 * e8m0_f64(s[(c * k + j) / BLOCK])
                })
                .collect();
            for (r, a) in acts.iter().enumerate() {
                y[r * n + c] = dot_f64(a, &wc);
            }
        }
        vec![y]
    }

    /// The CPU records of each path with a packed form here once more with the weights packed.
    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records_packed(backend, self.cuda(), &packed_paths())
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
                Some(p) => mxfp4_gemm_packed(x, &p, out[0].f32(), l, faults),
                None => mxfp4_gemm(x, w, s, n, k, out[0].f32(), l, faults),
            },
            Launch::Cpu(l) => mxfp4_gemm(x, w, s, n, k, out[0].f32(), l, faults),
            Launch::Cuda(c) if slots::marked(case) && case.rows <= DECODE_ROWS => {
                slots::run(c, x, w, s, n, k, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
            Launch::Cuda(c) if grouped::marked(case) && case.rows > DECODE_ROWS => {
                grouped::run(c, x, w, s, n, k, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
            Launch::Cuda(c) => {
                mxfp4_gemm_cuda(c, x, w, s, n, k, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
