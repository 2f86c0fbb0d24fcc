//! `grouped_proj`: the grouped output projection `wo_a` (o viewed [g, H*hd/g] against wo_a viewed [g, o_lora, H*hd/g]).

mod cpu;
pub mod cuda;

pub use cpu::grouped_proj;
pub use cuda::grouped_proj_cuda;

use tensorfold_formats::e4m3;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;
use crate::fp8_gemm::BLOCK;
use crate::gemm::reference::{act_quant_f64, activations, dot_f64, e8m0_f64, fp8_codes, scale_codes};

pub struct GroupedProj;

impl Kernel for GroupedProj {
    fn name(&self) -> &'static str {
        "grouped_proj"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 2e-6,
            abs: 2e-5,
            rel: 2e-5,
            why: "fp8_gemm's arithmetic per group: exact FP8 products, 8 FMAs a lane, a 4-level tree, K/128 scaled adds",
        }
    }

    fn cases(&self) -> Vec<Case> {
        // (rows, groups, o_lora, H*hd): awkward sizes, then V4-Flash g = 8, o_lora = 1024, H*hd = 64 * 512.
        [
            (3, 1, 1, 1),
            (17, 3, 31, 3 * 257),
            (5, 4, 17, 4 * 130),
            (9, 2, 129, 2 * 128),
            (1, 8, 1024, 32_768),
        ]
        .into_iter()
        .map(|(rows, g, o_lora, d)| Case::new(rows, &[("groups", g), ("o_lora", o_lora), ("d", d)]))
        .collect()
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (g, o_lora, d) = (case.get("groups"), case.get("o_lora"), case.get("d"));
        let (n, group_dim) = (g * o_lora, d / g);
        let o = activations(rng, case.rows, d);
        let w = fp8_codes(rng, n * group_dim);
        let s = scale_codes(rng, n.div_ceil(BLOCK) * group_dim.div_ceil(BLOCK), -12);
        vec![
            Arg::per_row("o", Buf::F32(o), d),
            Arg::shared("wo_a", Buf::U8(w)),
            Arg::shared("wo_a_scale", Buf::U8(s)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("groups") * case.get("o_lora"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (g, o_lora, d) = (case.get("groups"), case.get("o_lora"), case.get("d"));
        let (n, k) = (g * o_lora, d / g);
        let (o, w, s) = (inputs[0].buf.f32(), inputs[1].buf.u8(), inputs[2].buf.u8());
        let grid_k = k.div_ceil(BLOCK);
        let acts: Vec<Vec<Vec<f64>>> = o
            .chunks(d)
            .map(|row| row.chunks(k).map(|part| act_quant_f64(part, BLOCK)).collect())
            .collect();
        let mut y = vec![0f64; case.rows * n];
        for c in 0..n {
            let wc: Vec<f64> = (0..k)
                .map(|j| e4m3::decode(w[c * k + j]) as f64 * e8m0_f64(s[c / BLOCK * grid_k + j / BLOCK]))
                .collect();
            for (r, groups) in acts.iter().enumerate() {
                y[r * n + c] = dot_f64(&groups[c / o_lora], &wc);
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
        &["wrong_group", "lost_act_scale", "order_by_tile"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (g, o_lora, d) = (case.get("groups"), case.get("o_lora"), case.get("d"));
        let (o, w, s) = (inputs[0].buf.f32(), inputs[1].buf.u8(), inputs[2].buf.u8());
        match launch {
            Launch::Cpu(l) => grouped_proj(o, w, s, g, o_lora, d / g, out[0].f32(), l, faults),
            Launch::Cuda(c) => {
                grouped_proj_cuda(c, o, w, s, g, o_lora, d / g, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
