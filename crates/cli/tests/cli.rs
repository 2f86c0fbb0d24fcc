//! The `tensorfold` binary end to end: synth, info, help and error exits.

use std::process::{Command, Output};

fn tensorfold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorfold"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn synth_then_info() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let out = tensorfold(&["synth", "--family", "dsv4", "--preset", "tiny", "--out", path]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("wrote "), "{}", text(&out));

    let out = tensorfold(&["info", path]);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    for needle in [
        "family       dsv4",
        "all match the dsv4 manifest",
        "layer 1   ratio 4    window + ratio-4 compressed (CSA) + indexer",
        "layer 2   ratio 128  window + ratio-128 compressed (HCA)",
        "hash router",
        "biased router",
        "mtp 0",
        "active per token",
        "F8_E4M3",
        "memory at 65536 tokens",
    ] {
        assert!(report.contains(needle), "missing `{needle}` in:\n{report}");
    }

    let out = tensorfold(&["info", path, "--json", "--context", "4096", "--read-all"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["family"], "dsv4");
    assert_eq!(v["compress_ratios"], serde_json::json!([0, 4, 128, 4, 0]));
    assert_eq!(v["memory"][0]["context"], 4096);
    assert!(v["active_params"].as_u64().unwrap() < v["total_params"].as_u64().unwrap());

    let out = tensorfold(&["synth", "--preset", "tiny", "--out", path]);
    assert!(!out.status.success());
    assert!(text(&out).contains("pass --force"), "{}", text(&out));
}

#[test]
fn dsv41_synth_then_info() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let out = tensorfold(&["synth", "--family", "dsv41", "--preset", "tiny", "--out", path]);
    assert!(out.status.success(), "{}", text(&out));
    let out = tensorfold(&["info", path]);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    for needle in [
        "family       dsv41",
        "all match the dsv41 manifest",
        "layer 2   ratio 2, KV source, indexer with keys",
        "layer 6   ratio 1, reads KV of 4, indexer queries, keys of 4, inside the candidate pool",
        "Engram before",
        "dspark 2",
        "Engram tables",
    ] {
        assert!(report.contains(needle), "missing `{needle}` in:\n{report}");
    }
    let out = tensorfold(&["info", path, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["family"], "dsv41");
    assert_eq!(v["engram_layer_ids"], serde_json::json!([1, 3]));
    let out = tensorfold(&[
        "synth",
        "--family",
        "dsv41",
        "--preset",
        "flash-layers",
        "--out",
        path,
        "--force",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("choose tiny or small"), "{}", text(&out));
}

#[test]
fn errors_exit_nonzero_with_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let out = tensorfold(&["info", path]);
    assert!(!out.status.success());
    assert!(text(&out).contains("config.json"), "{}", text(&out));

    let out = tensorfold(&["synth", "--preset", "flash-layers", "--out", path]);
    assert!(!out.status.success());
    assert!(text(&out).contains("needs --layers N"), "{}", text(&out));

    let out = tensorfold(&["synth", "--family", "kimi", "--out", path]);
    assert!(text(&out).contains("synth writes `dsv4`"), "{}", text(&out));

    std::fs::write(dir.path().join("config.json"), r#"{"model_type": "llama"}"#).unwrap();
    let out = tensorfold(&["info", path]);
    assert!(
        text(&out).contains("model_type `llama` is not a family tensorfold reads"),
        "{}",
        text(&out)
    );
}

#[test]
fn help_lists_the_subcommands() {
    let out = tensorfold(&["--help"]);
    let help = text(&out);
    assert!(out.status.success());
    assert!(help.contains("synth") && help.contains("info"), "{help}");
    let out = tensorfold(&["synth", "--help"]);
    assert!(text(&out).contains("flash-layers"), "{}", text(&out));
}

#[test]
fn cuda_contract_without_a_gpu_says_why() {
    if tensorfold_kernels::cuda::gpu().is_ok() {
        eprintln!("skipped: this machine has a usable CUDA GPU");
        return;
    }
    let out = tensorfold(&["kernel-contract", "--backend", "cuda", "--kernel", "rms_norm"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("CUDA is unavailable: "), "{}", text(&out));
    let out = tensorfold(&["kernel-contract", "--backend", "cpu", "--compile-only"]);
    assert!(
        !out.status.success() && text(&out).contains("--backend cuda"),
        "{}",
        text(&out)
    );
    let out = tensorfold(&[
        "kernel-contract",
        "--backend",
        "cuda",
        "--compile-only",
        "--arch",
        "sm_75",
    ]);
    assert!(
        !out.status.success() && text(&out).contains("supported are"),
        "{}",
        text(&out)
    );
}

#[test]
fn contract_list_keeps_to_the_chosen_family_and_kernel() {
    let names = |args: &[&str]| -> Vec<String> {
        let out = tensorfold(&[&["kernel-contract", "--list"], args].concat());
        assert!(out.status.success(), "{}", text(&out));
        let list = text(&out);
        list.lines()
            .filter(|l| !l.starts_with(' '))
            .map(|l| l.split(' ').next().unwrap_or_default().to_string())
            .collect()
    };
    let v41 = names(&["--only", "dsv41"]);
    assert!(
        v41.iter().any(|n| n == "engram_gate") && !v41.iter().any(|n| n == "fp8_gemm"),
        "{v41:?}"
    );
    let v4 = names(&["--only", "dsv4"]);
    assert!(
        v4.iter().any(|n| n == "fp8_gemm") && !v4.iter().any(|n| n == "engram_gate"),
        "{v4:?}"
    );
    assert_eq!(names(&["--kernel", "rope"]), ["rope"]);
    for args in [&["--only", "dsv5"][..], &["--only", "dsv41", "--kernel", "fp8_gemm"]] {
        let out = tensorfold(&[&["kernel-contract"], args].concat());
        assert!(
            !out.status.success() && text(&out).contains("families: dsv4, dsv41"),
            "{args:?}: {}",
            text(&out)
        );
    }
}

#[test]
fn contract_list_shows_an_outputs_own_bound() {
    let out = tensorfold(&["kernel-contract", "--list", "--only", "dsv4"]);
    let list = text(&out);
    assert!(out.status.success(), "{list}");
    let lines: Vec<&str> = list.lines().collect();
    let own = |kernel: &str, output: &str| {
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("{kernel} (")))
            .unwrap_or_else(|| panic!("{kernel} listed: {list}"));
        lines
            .get(at + 1)
            .is_some_and(|l| l.starts_with(&format!("  output {output}: bound")))
    };
    assert!(own("rms_norm_quant", "yq") && own("swiglu_quant", "hq"), "{list}");
    assert!(!own("rms_norm", "y"), "rms_norm states one bound: {list}");
}
