//! Every CUDA kernel and planted control compiles with NVRTC for sm_80 and sm_90 and its records fit; no GPU needed.

use tensorfold_kernels::contract::{Backend, RunOptions, compile_only};
use tensorfold_kernels::cuda::{self, CudaKernel, CudaLaunch};
use tensorfold_kernels::registry;

fn nvrtc() -> bool {
    match cuda::nvrtc_available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

#[test]
fn every_cuda_kernel_compiles_for_sm80_and_sm90() {
    if !nvrtc() {
        return;
    }
    let opts = RunOptions {
        backend: Backend::Cuda,
        only: None,
        kernel: None,
    };
    let mut out = Vec::new();
    let s = compile_only(&registry::all(), &[80, 90], &opts, &mut out);
    let report = String::from_utf8(out).unwrap();
    eprintln!("{report}{}", s.line(&[80, 90]));
    assert!(s.ok(), "{report}");
    assert!(s.kernels >= 5, "{report}");
}

#[test]
fn a_kernel_that_does_not_compile_fails_with_the_compiler_log() {
    if !nvrtc() {
        return;
    }
    static BROKEN: CudaKernel = CudaKernel {
        name: "broken",
        source: "extern \"C\" __global__ void broken(float* y) { y[0] = undeclared_name; }",
        entries: &["broken"],
        controls: &[],
        records: &[CudaLaunch::new(32, 1)],
    };
    let err = cuda::compile(&BROKEN, 90, None).unwrap_err();
    assert!(err.contains("undeclared_name"), "{err}");
}

#[test]
fn the_compressor_indexer_and_attention_kernels_have_a_cuda_side_with_a_race_control() {
    for name in ["compress", "index_scores", "index_topk", "sparse_attn"] {
        let kernel = registry::all().into_iter().find(|k| k.name() == name).unwrap();
        let k = kernel.cuda().unwrap_or_else(|| panic!("{name} has no CUDA side"));
        assert_eq!(k.name, name);
        assert!(k.controls.len() >= 2 && k.controls.contains(&"race_no_sync"), "{name}");
        assert_eq!(kernel.launches(Backend::Cuda).len(), k.records.len(), "{name}");
        for control in k.controls {
            assert!(
                k.source.contains(&format!("TF_FAULT_{control}")),
                "{name}: {control} is not planted"
            );
        }
    }
}

#[test]
fn every_dsv4_kernel_has_a_cuda_side_with_a_race_control() {
    let dsv4: Vec<_> = registry::all().into_iter().filter(|k| k.family() == "dsv4").collect();
    assert!(dsv4.iter().any(|k| k.name() == "mxfp4_gemm"));
    for kernel in dsv4 {
        let name = kernel.name();
        let k = kernel.cuda().unwrap_or_else(|| panic!("{name} has no CUDA side"));
        assert!(k.controls.len() >= 2 && k.controls.contains(&"race_no_sync"), "{name}");
        for control in k.controls {
            assert!(
                k.source.contains(&format!("TF_FAULT_{control}")),
                "{name}: {control} is not planted"
            );
        }
    }
}

#[test]
fn every_dsv41_kernel_has_a_cuda_side_with_a_race_control() {
    let v41: Vec<_> = registry::all()
        .into_iter()
        .filter(|k| k.family() == "dsv41" || k.also_in().contains(&"dsv41"))
        .collect();
    assert!(v41.len() >= 8, "{} dsv41 kernels", v41.len());
    for kernel in v41 {
        let name = kernel.name();
        let k = kernel.cuda().unwrap_or_else(|| panic!("{name} has no CUDA side"));
        assert_eq!(k.name, name);
        assert!(k.controls.len() >= 2 && k.controls.contains(&"race_no_sync"), "{name}");
        assert_eq!(kernel.launches(Backend::Cuda).len(), k.records.len(), "{name}");
        for control in k.controls {
            assert!(
                k.source.contains(&format!("TF_FAULT_{control}")),
                "{name}: {control} is not planted"
            );
        }
    }
}

#[test]
fn the_quantised_and_bf16_gemms_run_on_tensor_cores() {
    for name in ["fp8_gemm", "mxfp4_gemm", "bf16_gemm", "grouped_proj"] {
        let kernel = registry::all().into_iter().find(|k| k.name() == name).unwrap();
        let k = kernel.cuda().unwrap_or_else(|| panic!("{name} has no CUDA side"));
        assert!(
            k.source.contains("mma.sync.aligned.m16n8k16"),
            "{name} has no tensor-core MMA"
        );
    }
}

#[test]
fn the_prompt_gemms_take_warpgroup_mma_on_sm90_only() {
    for name in ["fp8_gemm", "mxfp4_gemm", "grouped_proj"] {
        let kernel = registry::all().into_iter().find(|k| k.name() == name).unwrap();
        let k = kernel.cuda().unwrap();
        assert!(
            k.source.contains("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"),
            "{name}"
        );
    }
    assert_eq!(
        (cuda::target(90), cuda::target(80)),
        ("sm_90a".to_string(), "sm_80".to_string())
    );
    if !nvrtc() {
        return;
    }
    static PROBE: CudaKernel = CudaKernel {
        name: "probe",
        source: concat!(
            include_str!("../src/cuda/wgmma.cuh"),
            "#ifndef TF_WGMMA\n#error no warpgroup MMA\n#endif\nextern \"C\" __global__ void probe(float* y) { y[0] = 1.0f; }"
        ),
        entries: &["probe"],
        controls: &[],
        records: &[CudaLaunch::new(32, 1)],
    };
    assert!(cuda::compile(&PROBE, 90, None).is_ok());
    let err = cuda::compile(&PROBE, 80, None).unwrap_err();
    assert!(err.contains("no warpgroup MMA"), "{err}");
}

/// The text of entry `entry`'s body in `source`, up to the next entry.
fn body<'s>(source: &'s str, entry: &str) -> &'s str {
    let at = source
        .match_indices(&format!(" {entry}("))
        .map(|(i, _)| i)
        .find(|&i| {
            source[..i]
                .rsplit('\n')
                .next()
                .is_some_and(|line| line.contains("__global__"))
        })
        .unwrap_or_else(|| panic!("no __global__ entry {entry}"));
    let open = at + source[at..].find('{').expect("an entry body");
    let end = source[open..].find("extern \"C\"").map_or(source.len(), |e| open + e);
    &source[open + 1..end]
}

/// The body of device function `name` in `source` (its braces matched), if `source` defines it.
fn device_body<'s>(source: &'s str, name: &str) -> Option<&'s str> {
    let at = source.match_indices(&format!(" {name}(")).map(|(i, _)| i).find(|&i| {
        source[..i]
            .rsplit('\n')
            .next()
            .is_some_and(|line| line.contains("__device__"))
    })?;
    let open = at + source[at..].find('{')?;
    let mut depth = 0;
    for (i, ch) in source[open..].char_indices() {
        depth += match ch {
            '{' => 1,
            '}' => -1,
            _ => 0,
        };
        if depth == 0 {
            return Some(&source[open + 1..open + i]);
        }
    }
    None
}

/// Whether device function `name` waits for the grid itself, or hands its `OPEN` flag to a function that does.
fn waits_inside(source: &str, name: &str, depth: usize) -> bool {
    let Some(b) = device_body(source, name) else {
        return false;
    };
    b.contains("tf_grid_wait()")
        || depth > 0
            && b.match_indices("OPEN>(").any(|(i, _)| {
                let call = &b[..i];
                let start =
                    call.rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '<' || c == ',' || c == ' '));
                let callee = call[start.map_or(0, |s| s + 1)..]
                    .trim()
                    .split('<')
                    .next()
                    .unwrap_or("");
                !callee.is_empty() && waits_inside(source, callee, depth - 1)
            })
}

/// The function an entry calls right after `tf_grid_open();`.
fn first_callee(body: &str) -> &str {
    let rest = body.trim_start().trim_start_matches("tf_grid_open();").trim_start();
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn every_entry_waits_for_its_inputs_before_it_touches_them() {
    for k in registry::all() {
        let Some(c) = k.cuda() else { continue };
        for entry in c.entries {
            let b = body(c.source, entry).trim_start();
            let begins = b.starts_with("tf_grid_begin();");
            // An entry may load what no kernel writes (its weights) between opening and waiting, itself or in the device function it calls first.
            let opens_then_waits = b.starts_with("tf_grid_open();")
                && (b.contains("tf_grid_wait();") || waits_inside(c.source, first_callee(b), 2));
            assert!(
                begins || opens_then_waits,
                "{entry} must start with tf_grid_begin() (or tf_grid_open() and wait before touching its inputs): graphs chain it programmatically"
            );
        }
    }
}
