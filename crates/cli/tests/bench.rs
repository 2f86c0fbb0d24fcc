//! `tensorfold bench` over HTTP: each benchmark against `tensorfold serve` on a tiny checkpoint, and against a fake server.

mod fake;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

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

/// Runs `tensorfold bench` with the whitespace-separated `args`.
fn bench(args: &str) -> Output {
    let mut all = vec!["bench"];
    all.extend(args.split_whitespace());
    tensorfold(&all)
}

/// Runs a benchmark that must succeed and print JSON.
fn bench_json(args: &str) -> Value {
    let out = bench(&format!("{args} --json"));
    assert!(out.status.success(), "`bench {args}` failed:\n{}", text(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("`bench {args}` printed no JSON ({e}):\n{}", text(&out)))
}

/// Runs a benchmark that must fail; returns what it printed.
fn bench_fails(args: &str) -> Output {
    let out = bench(args);
    assert!(!out.status.success(), "`bench {args}` passed:\n{}", text(&out));
    out
}

/// `tensorfold serve` on a tiny synth checkpoint on a free loopback port, killed when dropped.
struct Served {
    child: Child,
    url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 200")
}

fn serve_tiny() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny");
    let out = tensorfold(&["synth", "--preset", "tiny", "--out", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = dir.path().join("serve.log");
    let child = Command::new(env!("CARGO_BIN_EXE_tensorfold"))
        .args(["serve", "--model", model.to_str().unwrap(), "--port", &port.to_string()])
        .args(["--threads", "1", "--context", "4096", "--max-tokens", "64"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut served = Served {
        child,
        url: format!("http://127.0.0.1:{port}"),
        log,
        _dir: dir,
    };
    let start = Instant::now();
    while !health(port) {
        if let Ok(Some(status)) = served.child.try_wait() {
            panic!("tensorfold serve exited ({status}):\n{}", served.log());
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no health in 120 s:\n{}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    served
}

impl Served {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn is_sha(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn positive(v: &Value) -> bool {
    v.as_f64().is_some_and(|x| x > 0.0)
}

fn has(out: &Output, needle: &str) -> bool {
    text(out).contains(needle)
}

#[test]
fn each_bench_against_a_tiny_server() {
    let s = serve_tiny();
    let url = s.url.as_str();

    let v = bench_json(&format!("decode --url {url} --runs 2 --warmup 0 --max-tokens 4"));
    assert_eq!(v["model"], "tiny", "{v}");
    let rows = v["prompts"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["prompt"].as_str().unwrap()).collect();
    assert_eq!(names, ["short", "code", "long"]);
    let lens: Vec<u64> = rows.iter().map(|r| r["prompt_tokens"].as_u64().unwrap()).collect();
    assert!(
        lens[0] < 40 && lens[1] > 150 && lens[2] > 1000,
        "prompt lengths {lens:?}"
    );
    for r in rows {
        assert_eq!(r["completion_tokens"], 4, "{r}");
        assert_eq!(r["runs"].as_array().unwrap().len(), 2, "{r}");
        assert!(positive(&r["decode_tokens_per_s"]["median"]), "{r}");
        assert!(positive(&r["ttft_s"]["min"]), "{r}");
        assert!(positive(&r["itl_s"]["p99"]), "{r}");
        assert!(is_sha(&r["token_sha"]), "{r}");
        assert_eq!(r["token_sha_same_every_run"], true, "{r}");
        let (d, a) = (r["drafted"].as_u64().unwrap(), r["accepted"].as_u64().unwrap());
        assert!(a <= d, "{r}");
        assert!(r["runs"][0]["drafted"].is_u64(), "{r}");
    }
    let out = bench(&format!("decode --url {url} --runs 1 --warmup 0 --max-tokens 2"));
    assert!(out.status.success(), "{}", text(&out));
    for needle in [
        "decode tokens/s",
        "ITL p50",
        "short",
        "code",
        "long",
        "same every run",
        "drafted",
    ] {
        assert!(has(&out, needle), "missing `{needle}` in:\n{}", text(&out));
    }

    let nanos = std::time::SystemTime::UNIX_EPOCH.elapsed().unwrap().as_nanos();
    let cache = format!("cache --url {url} --nonce test-{nanos} --max-tokens 2");
    let v = bench_json(&format!("{cache} --require-cold"));
    assert_eq!(v["cold_verified"], true, "{v}");
    assert_eq!(v["cold"]["cached_tokens"], 0, "{v}");
    let prompt = v["cold"]["prompt_tokens"].as_u64().unwrap();
    let cached = v["resumed"]["cached_tokens"].as_u64().unwrap();
    assert!(
        cached > 0 && cached < prompt,
        "resumed cached {cached} of {prompt}: {v}"
    );
    assert_eq!(
        v["resumed"]["usage_cached_tokens"],
        v["resumed"]["tensorfold_cached_tokens"]
    );
    assert!(
        positive(&v["cold"]["ttft_s"]) && positive(&v["resumed"]["ttft_s"]),
        "{v}"
    );
    assert_eq!(v["same_token_sha"], true, "{v}");
    // The same nonce again: the server holds that prefix, so --require-cold must refuse to report.
    let out = bench_fails(&format!("{cache} --require-cold"));
    assert!(has(&out, "was not cold"), "{}", text(&out));
    assert!(
        out.stdout.is_empty(),
        "figures printed for a warm start:\n{}",
        text(&out)
    );
    let out = bench(&cache);
    assert!(out.status.success() && has(&out, "NOT a cold start"), "{}", text(&out));

    let v = bench_json(&format!(
        "concurrent --url {url} --alone --serial --concurrency 1,4 --requests 4 --max-tokens 3"
    ));
    assert_eq!(v["token_sha_checked"], true, "{v}");
    assert_eq!(v["token_sha_mismatches"], 0, "{v}");
    let phases = v["phases"].as_array().unwrap();
    let labels: Vec<&str> = phases.iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["alone", "serial (draft off)", "concurrency 1", "concurrency 4"]
    );
    for p in phases {
        assert_eq!(p["completion_tokens"], 12, "{p}");
        assert!(positive(&p["tokens_per_s"]) && positive(&p["latency_s"]["p90"]), "{p}");
        let reqs = p["requests"].as_array().unwrap();
        assert_eq!(reqs.len(), 4);
        assert!(
            reqs.iter()
                .all(|r| is_sha(&r["token_sha"]) && positive(&r["latency_s"])),
            "{p}"
        );
        assert_eq!(reqs[1]["request"], "#1 (code, temperature 0.7, seed 1001)");
        assert!(p["accepted"].as_u64().unwrap() <= p["drafted"].as_u64().unwrap(), "{p}");
    }
    assert_eq!(phases[1]["drafted"], 0, "the serial reference drafts nothing");
    let out = bench(&format!(
        "concurrent --url {url} --alone --concurrency 2 --requests 2 --max-tokens 2"
    ));
    assert!(out.status.success(), "{}", text(&out));
    assert!(has(&out, "concurrency 2") && has(&out, "2/2 same"), "{}", text(&out));
}

#[test]
fn concurrent_fails_naming_the_request_whose_token_sha_differs() {
    let args = "--alone --concurrency 2 --requests 3 --max-tokens 3";
    let same = fake::start(fake::Mode {
        extension: true,
        ..Default::default()
    });
    let out = bench(&format!("concurrent --url {same} {args}"));
    assert!(out.status.success() && has(&out, "3/3 same"), "{}", text(&out));

    let perturbed = fake::start(fake::Mode {
        extension: true,
        perturb_seed: Some(1001),
        ..Default::default()
    });
    let out = bench_fails(&format!("concurrent --url {perturbed} {args}"));
    let t = text(&out);
    assert!(
        t.contains("request #1 (code, temperature 0.7, seed 1001): token_sha f"),
        "{t}"
    );
    assert!(t.contains("token_sha differs for 1 request runs"), "{t}");
    assert!(t.contains("1 of 3 DIFFER"), "{t}");
    assert!(
        !t.contains("#0 (") && !t.contains("#2 ("),
        "only request #1 differs:\n{t}"
    );
}

#[test]
fn a_server_without_the_extension_gets_figures_marked_unavailable() {
    let url = fake::start(fake::Mode::default());
    let v = bench_json(&format!(
        "concurrent --url {url} --concurrency 1,3 --requests 3 --max-tokens 4"
    ));
    assert_eq!(v["model"], "fake");
    assert_eq!(v["token_sha_checked"], false, "{v}");
    assert_eq!(v["phases"][1]["completion_tokens"], 12, "{v}");
    let out = bench(&format!("concurrent --url {url} --concurrency 2 --requests 2"));
    assert!(out.status.success() && has(&out, "unavailable"), "{}", text(&out));

    let v = bench_json(&format!("decode --url {url} --runs 2 --max-tokens 5 --prompts short"));
    let row = &v["prompts"][0];
    assert!(
        row["token_sha"].is_null() && row["token_sha_same_every_run"].is_null() && row["drafted"].is_null(),
        "{row}"
    );
    assert!(positive(&row["decode_tokens_per_s"]["median"]), "{row}");
    let runs = row["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["text_events"] == 5), "{row}");

    // No cached-token count at all: coldness cannot be verified, so --require-cold refuses and plain cache says so.
    let out = bench_fails(&format!("cache --url {url} --require-cold"));
    assert!(has(&out, "reports no cached-token count"), "{}", text(&out));
    let out = bench(&format!("cache --url {url}"));
    assert!(
        out.status.success() && has(&out, "cold start unverified"),
        "{}",
        text(&out)
    );

    // Usage says 0 cached but there is no extension: cold is verified from usage alone.
    let zero = fake::start(fake::Mode {
        cached: Some(0),
        ..Default::default()
    });
    let v = bench_json(&format!("cache --url {zero} --require-cold"));
    assert_eq!(v["cold_verified"], true, "{v}");
    assert!(
        v["cold"]["tensorfold_cached_tokens"].is_null() && v["same_token_sha"].is_null(),
        "{v}"
    );

    // A vLLM-style server that reports a cached prefix in usage only: refused.
    let warm = fake::start(fake::Mode {
        cached: Some(64),
        ..Default::default()
    });
    let out = bench_fails(&format!("cache --url {warm} --require-cold"));
    assert!(
        has(&out, "64 of the first request's 100 prompt tokens"),
        "{}",
        text(&out)
    );
}

/// `bench kernels --json` on the benchmarks named `only` with small measurements and the extra `args`.
fn kernels_json(only: &str, args: &[&str]) -> Value {
    let base = [
        "bench",
        "kernels",
        "--json",
        "--seconds",
        "0.01",
        "--read-mib",
        "8",
        "--only",
        only,
    ];
    let out = tensorfold(&[&base[..], args].concat());
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn kernels_report_each_call_beside_a_paired_read_of_its_weights() {
    let v = kernels_json("fp8 gemv", &["--working-set-mib", "1"]);
    let results = v["results"].as_array().expect("results");
    assert!(results.len() >= 8, "{v}");
    for r in results {
        for key in [
            "weight_gb_per_s",
            "paired_read_gb_per_s",
            "fraction_of_paired_read",
            "read_bandwidth_gb_per_s",
        ] {
            assert!(positive(&r[key]), "{key} of {r}");
        }
        for (fraction, of) in [
            ("fraction_of_paired_read", "paired_read_gb_per_s"),
            ("fraction_of_read_bandwidth", "read_bandwidth_gb_per_s"),
        ] {
            let ratio = r["weight_gb_per_s"].as_f64().unwrap() / r[of].as_f64().unwrap();
            assert!(
                (ratio - r[fraction].as_f64().unwrap()).abs() < 1e-9,
                "{fraction} of {r}"
            );
        }
    }
    // Each row's read is its own measurement, taken beside its calls, not the run's first or last.
    let reads: std::collections::HashSet<u64> = results
        .iter()
        .map(|r| r["read_bandwidth_gb_per_s"].as_f64().unwrap().to_bits())
        .collect();
    assert!(reads.len() > 1, "{v}");
    assert!(positive(&v["read_bandwidth_gb_per_s"]), "{v}");
    let out = bench_fails("kernels --read-mib 0");
    assert!(has(&out, "read-mib"), "{}", text(&out));
    let out = bench_fails("kernels --simd avx1024");
    assert!(has(&out, "this CPU runs portable"), "{}", text(&out));
    let v = kernels_json("w1 spread", &["--working-set-mib", "1"]);
    let names: Vec<&str> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mxfp4 gemv w1 spread"; 2], "{v}");
    let v = kernels_json("fp8 gemv cached", &["--simd", "portable"]);
    assert_eq!(v["simd"], "portable", "{v}");
    assert_eq!(v["gemv_simd"], "portable", "{v}");
    assert_eq!(v["fp8_gemv_simd"], "portable", "{v}");
    assert_eq!(v["mxfp4_gemv_simd"], "portable", "{v}");
}
