//! No gate is vacuous: a deliberately wrong kernel fails each one, and the registry passes with every control red.

use std::sync::atomic::{AtomicU32, Ordering};

use tensorfold_kernels::contract::rng::Rng;
use tensorfold_kernels::contract::{
    Arg, Backend, Bound, Buf, Case, Kernel, KnownFindings, Launch, OutBuf, OutKind, OutSpec, RunOptions, check_case,
    run,
};
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::{Faults, registry};

#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    None,
    Unwritten,
    GuardOverrun,
    Inaccurate,
    BatchDependent,
    LaunchDependent,
    Nondeterministic,
}

/// `y = 2x`, with one planted flaw.
struct Doubler(Flaw, AtomicU32);

impl Kernel for Doubler {
    fn name(&self) -> &'static str {
        "doubler"
    }
    fn family(&self) -> &'static str {
        "test"
    }
    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 1e-5,
            abs: 1e-5,
            rel: 1e-5,
            why: "loose, so that small planted drifts pass gate 2",
        }
    }
    fn cases(&self) -> Vec<Case> {
        vec![Case::new(9, &[("dim", 5)])]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let n = case.rows * case.get("dim");
        vec![Arg::per_row(
            "x",
            Buf::F32((0..n).map(|_| rng.normal()).collect()),
            case.get("dim"),
        )]
    }
    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "y",
            kind: OutKind::F32,
            row_len: case.get("dim"),
        }]
    }
    fn reference(&self, _: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        vec![inputs[0].buf.f32().iter().map(|&x| 2.0 * x as f64).collect()]
    }
    fn launches(&self, _: Backend) -> Vec<Launch> {
        CpuLaunch::records().into_iter().map(Launch::Cpu).collect()
    }
    fn controls(&self) -> &'static [&'static str] {
        &[]
    }
    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, _: Faults, out: &mut [OutBuf<'_>]) {
        let l = launch.cpu();
        let y = out[0].f32();
        let n = y.len();
        let written = if self.0 == Flaw::Unwritten { n - 1 } else { n };
        for (o, &x) in y[..written].iter_mut().zip(inputs[0].buf.f32()) {
            *o = 2.0 * x;
        }
        match self.0 {
            Flaw::None | Flaw::Unwritten => {}
            // SAFETY: the harness allocates guard bands after every output; this writes into one on purpose.
            Flaw::GuardOverrun => unsafe { y.as_mut_ptr().add(n).write(0.0) },
            Flaw::Inaccurate => y[0] += 1e-3,
            Flaw::BatchDependent => y[0] += case.rows as f32 * 1e-6,
            Flaw::LaunchDependent => y[0] += l.threads as f32 * 1e-6,
            Flaw::Nondeterministic => y[0] += self.1.fetch_add(1, Ordering::Relaxed) as f32 * 1e-6,
        }
    }
}

fn gate_of(flaw: Flaw) -> Option<u8> {
    let k = Doubler(flaw, AtomicU32::new(0));
    let launches = k.launches(Backend::Cpu);
    check_case(&k, &k.cases()[0], &launches, Faults::NONE).err().map(|e| {
        eprintln!("{e}");
        e.gate
    })
}

#[test]
fn each_gate_catches_its_fault() {
    assert_eq!(gate_of(Flaw::None), None);
    assert_eq!(gate_of(Flaw::Unwritten), Some(1));
    assert_eq!(gate_of(Flaw::GuardOverrun), Some(1));
    assert_eq!(gate_of(Flaw::Inaccurate), Some(2));
    assert_eq!(gate_of(Flaw::BatchDependent), Some(3));
    assert_eq!(gate_of(Flaw::LaunchDependent), Some(3));
    assert_eq!(gate_of(Flaw::Nondeterministic), Some(4));
}

#[test]
fn failing_kernel_fails_the_run_and_findings_cover_it() {
    let k = Doubler(Flaw::Inaccurate, AtomicU32::new(0));
    let opts = RunOptions {
        backend: Backend::Cpu,
        only: None,
        kernel: None,
    };
    let mut out = Vec::new();
    let s = run(&[&k], &opts, &KnownFindings::default(), &mut out);
    assert_eq!((s.fail, s.pass), (1, 0));
    assert!(!s.ok());
    let findings = KnownFindings::parse("doubler cpu * #1 planted for this test").unwrap();
    let s = run(&[&k], &opts, &findings, &mut out);
    assert_eq!((s.fail, s.known), (0, 1));
    assert!(String::from_utf8(out).unwrap().contains("known finding #1"));
}

#[test]
fn registry_passes_with_every_control_red() {
    let opts = RunOptions {
        backend: Backend::Cpu,
        only: Some("dsv4".into()),
        kernel: None,
    };
    let mut out = Vec::new();
    let s = run(&registry::all(), &opts, &KnownFindings::bundled(), &mut out);
    let report = String::from_utf8(out).unwrap();
    eprintln!("{report}{}", s.line(Backend::Cpu));
    assert!(s.ok(), "{report}");
    assert_eq!(s.pass, s.kernels);
    assert_eq!(s.red, s.controls);
    assert!(s.controls >= 2 * s.kernels);
}

#[test]
fn dsv41_run_covers_every_v41_kernel_with_every_control_red() {
    let opts = RunOptions {
        backend: Backend::Cpu,
        only: Some("dsv41".into()),
        kernel: None,
    };
    let mut out = Vec::new();
    let s = run(&registry::all(), &opts, &KnownFindings::bundled(), &mut out);
    let report = String::from_utf8(out).unwrap();
    eprintln!("{report}{}", s.line(Backend::Cpu));
    assert!(s.ok(), "{report}");
    for name in [
        "nvfp4_round_trip",
        "candidate_pool",
        "engram_hash",
        "engram_lookup",
        "engram_gate",
        "dspark_markov",
        "hc_pre",
        "compress",
    ] {
        assert!(
            report.contains(&format!("cpu {name} rows=")),
            "{name} is not in the dsv41 run"
        );
    }
    assert_eq!((s.pass, s.red), (s.kernels, s.controls));
    assert!(s.controls >= 2 * s.kernels);
}
