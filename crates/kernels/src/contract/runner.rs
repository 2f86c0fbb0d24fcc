//! Runs the contract over the registry: one line per kernel and case and control, then the SUMMARY line.

use std::io::Write;
use std::time::Instant;

use super::gates::check_case;
use super::{Backend, Kernel, KnownFindings};
use crate::faults::Faults;

/// Which kernels to check and where.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub backend: Backend,
    /// Only kernels of this family.
    pub only: Option<String>,
    /// Only the kernel of this name.
    pub kernel: Option<String>,
}

/// Counts for the SUMMARY line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub kernels: usize,
    pub pass: usize,
    pub fail: usize,
    pub known: usize,
    pub unsupported: usize,
    pub controls: usize,
    pub red: usize,
    pub missed: usize,
    pub limit_problems: usize,
    pub gates_ms: u128,
    pub limits_ms: u128,
}

impl Summary {
    /// True when nothing failed, no control was missed and no limit was exceeded.
    pub fn ok(&self) -> bool {
        self.fail == 0 && self.missed == 0 && self.limit_problems == 0
    }

    /// The documented SUMMARY line.
    pub fn line(&self, backend: Backend) -> String {
        format!(
            "SUMMARY {backend}: {} kernels: {} pass gates 1-4, {} fail, {} known findings; {} controls: {} red as planted, {} missed; {} limit problems; gates {} ms, limits {} ms",
            self.kernels,
            self.pass,
            self.fail,
            self.known,
            self.controls,
            self.red,
            self.missed,
            self.limit_problems,
            self.gates_ms,
            self.limits_ms
        )
    }
}

impl RunOptions {
    /// Whether `--only` and `--kernel` choose `kernel`.
    pub fn selects(&self, kernel: &dyn Kernel) -> bool {
        self.only
            .as_deref()
            .is_none_or(|f| f == kernel.family() || kernel.also_in().contains(&f))
            && self.kernel.as_deref().is_none_or(|k| k == kernel.name())
    }
}

/// Checks every selected kernel, writing report lines to `out`; the caller prints `Summary::line`.
pub fn run(kernels: &[&dyn Kernel], opts: &RunOptions, findings: &KnownFindings, out: &mut dyn Write) -> Summary {
    let mut s = Summary::default();
    let start = Instant::now();
    let backend = opts.backend;
    let gpu = match backend {
        Backend::Cuda => crate::cuda::gpu().ok(),
        Backend::Cpu => None,
    };
    let mut limits_ms = 0;
    for &kernel in kernels.iter().filter(|k| opts.selects(**k)) {
        let launches = kernel.launches(backend);
        let name = kernel.name();
        if launches.is_empty() {
            s.unsupported += 1;
            let _ = writeln!(out, "{backend} {name}: unsupported");
            continue;
        }
        s.kernels += 1;
        let (mut failed, mut known) = (false, false);
        for case in kernel.cases() {
            let t = Instant::now();
            let line = match check_case(kernel, &case, &launches, Faults::NONE) {
                Ok(stats) => format!(
                    "pass ({} launches, {} runs, rel err {:.1e})",
                    launches.len(),
                    stats.runs,
                    stats.max_rel_norm
                ),
                Err(e) => match findings.covering(name, &backend.to_string(), &case.to_string()) {
                    Some(f) => {
                        known = true;
                        format!("known finding #{} ({}): {e}", f.issue, f.reason)
                    }
                    None => {
                        failed = true;
                        format!("FAIL {e}")
                    }
                },
            };
            let _ = writeln!(out, "{backend} {name} {case}: {line} [{} ms]", t.elapsed().as_millis());
        }
        match (failed, known) {
            (true, _) => s.fail += 1,
            (false, true) => s.known += 1,
            (false, false) => s.pass += 1,
        }
        if let (Backend::Cuda, Some(k)) = (backend, kernel.cuda()) {
            let t = Instant::now();
            s.limit_problems += super::cuda::check_limits(k, gpu, out);
            limits_ms += t.elapsed().as_millis();
        }
        for &control in kernel.controls_on(backend) {
            s.controls += 1;
            match control_result(kernel, control, &launches) {
                Some(red) => {
                    s.red += 1;
                    let _ = writeln!(out, "{backend} {name} control {control}: red as planted ({red})");
                }
                None => {
                    s.missed += 1;
                    let _ = writeln!(
                        out,
                        "{backend} {name} control {control}: MISSED (every gate stayed green)"
                    );
                }
            }
        }
    }
    s.limits_ms = limits_ms;
    s.gates_ms = start.elapsed().as_millis() - limits_ms;
    s
}

/// The first gate failure control `control` causes, or `None` when every gate stays green.
#[cfg(feature = "contract")]
fn control_result(kernel: &dyn Kernel, control: &'static str, launches: &[super::Launch]) -> Option<String> {
    kernel.cases().iter().find_map(|case| {
        check_case(kernel, case, launches, Faults::planted(control))
            .err()
            .map(|e| format!("{case}: {e}"))
    })
}

/// Without the `contract` feature the controls are not compiled in, so none can turn red.
#[cfg(not(feature = "contract"))]
fn control_result(_: &dyn Kernel, _: &'static str, _: &[super::Launch]) -> Option<String> {
    None
}
