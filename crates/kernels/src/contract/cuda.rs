//! The CUDA side of the contract: limits from the compiled kernels, and the GPU-free compile check CI runs.

use std::io::Write;
use std::time::Instant;

use super::{Kernel, RunOptions};
use crate::cuda::{self, CudaKernel, limits};

/// Checks every launch record of `k` against each architecture's limits, from ptxas' report and, on a GPU, the loaded function's attributes.
pub fn check_limits(k: &'static CudaKernel, gpu: Option<&cuda::Gpu>, out: &mut dyn Write) -> usize {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    for lim in &limits::TABLE {
        match cuda::compile(k, lim.arch, None) {
            Ok(c) => {
                problems.extend(limits::check(k, lim, &c.resources));
                if gpu.is_some_and(|g| g.arch == lim.arch) {
                    for (entry, r) in &c.resources {
                        notes.push(format!(
                            "{entry} sm_{}: {} regs, {} B smem, {} B stack",
                            lim.arch, r.registers, r.shared_bytes, r.stack_bytes
                        ));
                    }
                }
            }
            Err(e) => problems.push(format!("sm_{}: {e}", lim.arch)),
        }
    }
    if let Some(g) = gpu {
        for &entry in k.entries {
            match g.function(k, entry, crate::Faults::NONE).and_then(|f| g.attributes(&f)) {
                Ok((max_threads, ..)) => {
                    for rec in k.records.iter().filter(|r| r.block > max_threads) {
                        problems.push(format!(
                            "{entry} on this sm_{} under {rec}: the loaded function allows {max_threads} threads per block",
                            g.arch
                        ));
                    }
                }
                Err(e) => problems.push(format!("{entry} on this GPU: {e}")),
            }
        }
    }
    for p in &problems {
        let _ = writeln!(out, "cuda {} LIMIT {p}", k.name);
    }
    if problems.is_empty() {
        notes.sort();
        let _ = writeln!(
            out,
            "cuda {} limits: every record fits sm_80, sm_86, sm_89, sm_90, sm_100, sm_120 ({})",
            k.name,
            notes.join("; ")
        );
    }
    problems.len()
}

/// Counts for the compile check's SUMMARY line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileSummary {
    pub kernels: usize,
    pub modules: usize,
    pub failed: usize,
    pub limit_problems: usize,
    pub ms: u128,
}

impl CompileSummary {
    pub fn ok(&self) -> bool {
        self.failed == 0 && self.limit_problems == 0
    }

    pub fn line(&self, archs: &[u32]) -> String {
        let archs: Vec<String> = archs.iter().map(|a| format!("sm_{a}")).collect();
        format!(
            "SUMMARY cuda compile ({}): {} kernels: {} modules compiled, {} fail; {} limit problems; {} ms",
            archs.join(","),
            self.kernels,
            self.modules - self.failed,
            self.failed,
            self.limit_problems,
            self.ms
        )
    }
}

/// Compiles every selected CUDA kernel, with each planted control, for each of `archs`, and checks limits; needs NVRTC, not a GPU.
pub fn compile_only(kernels: &[&dyn Kernel], archs: &[u32], opts: &RunOptions, out: &mut dyn Write) -> CompileSummary {
    let start = Instant::now();
    let mut s = CompileSummary::default();
    for kernel in kernels.iter().filter(|k| opts.selects(**k)) {
        let Some(k) = kernel.cuda() else {
            let _ = writeln!(out, "cuda {}: unsupported", kernel.name());
            continue;
        };
        s.kernels += 1;
        for &arch in archs {
            let lim = limits::of(arch);
            for fault in std::iter::once(None).chain(k.controls.iter().map(Some)) {
                s.modules += 1;
                let what = fault.map_or(String::new(), |f| format!(" with control {f}"));
                match cuda::compile(k, arch, fault.copied()) {
                    Ok(c) => {
                        let problems = match (fault, lim) {
                            (None, Some(lim)) => limits::check(k, lim, &c.resources),
                            _ => Vec::new(),
                        };
                        s.limit_problems += problems.len();
                        for p in &problems {
                            let _ = writeln!(out, "cuda {} LIMIT {p}", k.name);
                        }
                        if fault.is_none() && problems.is_empty() {
                            let _ = writeln!(out, "cuda {} sm_{arch}: compiles, records fit", k.name);
                        }
                    }
                    Err(e) => {
                        s.failed += 1;
                        let _ = writeln!(out, "cuda {} sm_{arch}{what}: FAIL {e}", k.name);
                    }
                }
            }
        }
    }
    s.ms = start.elapsed().as_millis();
    s
}
