//! `swiglu_quant`: `swiglu` with the act_quant of its output rows made in the same launch, for the FP8 and MXFP4 GEMMs that read them.

mod cpu;
pub mod cuda;

pub use cpu::swiglu_quant;
pub use cuda::swiglu_quant_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;
use crate::rms_norm_quant::{BLOCK, dequantised, round_trip_reference};
use crate::swiglu::{SWIGLU_LIMIT, Swiglu};

pub struct SwigluQuant;

impl Kernel for SwigluQuant {
    fn name(&self) -> &'static str {
        "swiglu_quant"
    }

    fn family(&self) -> &'static str {
        "dsv4"
    }

    fn bound(&self) -> Bound {
        Swiglu.bound()
    }

    fn output_bound(&self, name: &str) -> Bound {
        match name {
            "hq" => Bound {
                rel_norm: 0.04,
                abs: 1e-3,
                rel: 0.0626,
                why: "half an e4m3 step (2^-4 relative; 2^-10 s below the normals, s <= 1 here) over h's few ulp",
            },
            _ => self.bound(),
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Swiglu.cases();
        cases.extend([Case::new(6, &[("inter", 2048)]), Case::new(1, &[("inter", 2048)])]);
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        Swiglu.inputs(case, rng)
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        let out = |name| OutSpec {
            name,
            kind: OutKind::F32,
            row_len: case.get("inter"),
        };
        vec![out("h"), out("hq")]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let h = Swiglu.reference(case, inputs).swap_remove(0);
        let hq = round_trip_reference(&h, case.get("inter"));
        vec![h, hq]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["skip_last_row", "lost_act_scale", "no_up_clamp"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let [h, hq] = out else {
            panic!("swiglu_quant has two outputs")
        };
        let (g, u, w) = (inputs[0].buf.f32(), inputs[1].buf.f32(), inputs[2].buf.f32());
        let inter = case.get("inter");
        match launch {
            Launch::Cpu(l) => swiglu_quant(g, u, w, SWIGLU_LIMIT, h.f32(), hq.f32(), l, faults),
            Launch::Cuda(c) => {
                // Codes poisoned as f16 NaN and scales as NaN, so a code or scale never written shows in hq.
                let mut q = vec![0x7e00u16; case.rows * inter.next_multiple_of(8)];
                let mut scales = vec![f32::NAN; case.rows * inter.div_ceil(BLOCK)];
                swiglu_quant_cuda(c, g, u, w, SWIGLU_LIMIT, h.f32(), &mut q, &mut scales, faults)
                    .unwrap_or_else(|e| panic!("{e}"));
                hq.f32().copy_from_slice(&dequantised(&q, &scales, inter));
            }
        }
    }
}
