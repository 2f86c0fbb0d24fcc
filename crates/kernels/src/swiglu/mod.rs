//! `swiglu`: the MoE expert activation, `h = w * (silu(min(g, limit)) * clamp(u, -limit, limit))` with route weight `w`.

mod cpu;
pub mod cuda;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use cpu::swiglu;
pub use cuda::swiglu_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// The model's `swiglu_limit`.
pub const SWIGLU_LIMIT: f32 = 10.0;

pub struct Swiglu;

impl Kernel for Swiglu {
    fn name(&self) -> &'static str {
        "swiglu"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 5e-7,
            abs: 1e-30,
            rel: 1e-6,
            why: "silu within 4e-7 relative (FMA exp, one divide, one multiply), then two f32 multiplies at 2^-24 each",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, inter) in [(1, 1), (17, 31), (5, 257), (9, 128), (3, 2048), (2, 3072)] {
            cases.push(Case::new(rows, &[("inter", inter)]));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let inter = case.get("inter");
        // Gate and up reach past the limit (|v| up to 17); gate also far negative, where silu underflows.
        let gate: Vec<f32> = (0..case.rows * inter)
            .map(|i| {
                if i % 97 == 5 {
                    -40.0 * rng.uniform() as f32 - 80.0
                } else {
                    5.0 * rng.normal()
                }
            })
            .collect();
        let up: Vec<f32> = (0..case.rows * inter).map(|_| 5.0 * rng.normal()).collect();
        let w: Vec<f32> = (0..case.rows).map(|_| 2.5 * rng.uniform() as f32).collect();
        vec![
            Arg::per_row("gate", Buf::F32(gate), inter),
            Arg::per_row("up", Buf::F32(up), inter),
            Arg::per_row("route_weight", Buf::F32(w), 1),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "h",
            kind: OutKind::F32,
            row_len: case.get("inter"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let inter = case.get("inter");
        let limit = SWIGLU_LIMIT as f64;
        let (g, u, w) = (inputs[0].buf.f32(), inputs[1].buf.f32(), inputs[2].buf.f32());
        let h = (0..g.len())
            .map(|i| {
                let gc = (g[i] as f64).min(limit);
                let uc = (u[i] as f64).clamp(-limit, limit);
                w[i / inter] as f64 * gc / (1.0 + (-gc).exp()) * uc
            })
            .collect();
        vec![h]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "no_up_clamp", "weight_of_tile_start"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let _ = case;
        let (g, u, w) = (inputs[0].buf.f32(), inputs[1].buf.f32(), inputs[2].buf.f32());
        match launch {
            Launch::Cpu(l) => swiglu(g, u, w, SWIGLU_LIMIT, out[0].f32(), l, faults),
            Launch::Cuda(c) => {
                swiglu_cuda(c, g, u, w, SWIGLU_LIMIT, out[0].f32(), faults).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{CpuLaunch, SimdPath};

    #[test]
    fn every_path_gives_the_same_bits_over_the_whole_range() {
        // Every 4099th f32 bit pattern (both signs, NaN and inf included) as gate, against varied up values.
        let gate: Vec<f32> = (0..u32::MAX / 4099).map(|i| f32::from_bits(i * 4099)).collect();
        let up: Vec<f32> = gate.iter().enumerate().map(|(i, _)| (i % 41) as f32 - 20.5).collect();
        let w = [0.75f32];
        let mut want = vec![0f32; gate.len()];
        let launch = |simd| CpuLaunch::serial().only(simd);
        swiglu(
            &gate,
            &up,
            &w,
            SWIGLU_LIMIT,
            &mut want,
            &launch(SimdPath::Portable),
            Faults::NONE,
        );
        for simd in SimdPath::available() {
            let mut got = vec![0f32; gate.len()];
            swiglu(&gate, &up, &w, SWIGLU_LIMIT, &mut got, &launch(simd), Faults::NONE);
            let bad = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits());
            assert!(bad.is_none(), "{simd}: gate {:e}", gate[bad.unwrap_or(0)]);
        }
    }
}
