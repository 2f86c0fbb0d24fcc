//! Loading on the CPU packs the routed experts wherever the packed MXFP4 kernel runs, and FP8 weights only where packing them pays.

mod common;

use tensorfold_kernels::cpu::{Packing, packing_pays};
use tensorfold_kernels::mxfp4_gemm;
use tensorfold_model::dsv4::semantics::Semantics;

#[test]
fn cpu_load_packs_experts_wherever_the_packed_kernel_runs() {
    let m = common::tiny_dsv4(0, Semantics::official());
    let held = m.pack_for_cpu(2);
    let (mx, f8) = (packing_pays(Packing::Mxfp4), packing_pays(Packing::Fp8));
    if std::env::var_os("TENSORFOLD_CPU_PACKING").is_none() {
        assert_eq!(mx, mxfp4_gemm::packs(), "MXFP4 packs wherever its packed kernel runs");
    }
    assert_eq!(held > 0, mx || f8, "{held} bytes packed with MXFP4 {mx}, FP8 {f8}");
    let expert = &m.weights.layers[0].ffn.experts[0].w1;
    assert_eq!(expert.cpu_groups().is_some(), mx);
    assert_eq!(
        expert.groups_held() > 0,
        mx,
        "the load packed the expert before any pass"
    );
}
