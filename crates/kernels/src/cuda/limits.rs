//! Per-architecture resource limits, and the check of every launch record against a compiled kernel's resources.

use std::collections::HashMap;

use super::{CudaKernel, Resources};

/// What one block may use on an architecture (CUDA C Programming Guide, compute capability table).
#[derive(Clone, Copy, Debug)]
pub struct ArchLimits {
    pub arch: u32,
    pub threads_per_block: u32,
    pub registers_per_block: u32,
    pub registers_per_thread: u32,
    /// Shared memory a block gets without opting in to more.
    pub shared_per_block: u32,
    /// The most a block may opt in to (static plus dynamic).
    pub shared_per_block_optin: u32,
    pub threads_per_sm: u32,
    pub grid_x: u64,
}

const fn limits(arch: u32, optin_kib: u32, threads_per_sm: u32) -> ArchLimits {
    ArchLimits {
        arch,
        threads_per_block: 1024,
        registers_per_block: 65_536,
        registers_per_thread: 255,
        shared_per_block: 48 * 1024,
        shared_per_block_optin: optin_kib * 1024,
        threads_per_sm,
        grid_x: (1 << 31) - 1,
    }
}

/// sm_80, sm_86, sm_89, sm_90, sm_100, sm_120.
pub const TABLE: [ArchLimits; 6] = [
    limits(80, 163, 2048),
    limits(86, 99, 1536),
    limits(89, 99, 1536),
    limits(90, 227, 2048),
    limits(100, 227, 2048),
    limits(120, 99, 1536),
];

/// The limits of `arch`, if it is one the contract knows.
pub fn of(arch: u32) -> Option<&'static ArchLimits> {
    TABLE.iter().find(|l| l.arch == arch)
}

/// Registers a block of `threads` holds: per-thread count rounded to 8, whole warps of 32.
fn block_registers(registers: u32, threads: u32) -> u32 {
    registers.div_ceil(8) * 8 * threads.div_ceil(32) * 32
}

/// Every way a launch record of `kernel` would not fit `lim`, given ptxas' resources for each entry.
pub fn check(kernel: &CudaKernel, lim: &ArchLimits, resources: &HashMap<String, Resources>) -> Vec<String> {
    let mut problems = Vec::new();
    let sm = lim.arch;
    for &entry in kernel.entries {
        let Some(r) = resources.get(entry) else {
            problems.push(format!(
                "{entry} on sm_{sm}: no resource report (entry missing from the module?)"
            ));
            continue;
        };
        if r.registers > lim.registers_per_thread {
            problems.push(format!("{entry} on sm_{sm}: {} registers per thread", r.registers));
        }
        for rec in kernel.records {
            let what = format!("{entry} on sm_{sm} under {rec}");
            let block = super::dynamic::threads(entry, sm, rec.block);
            if block == 0 || block > lim.threads_per_block || block > lim.threads_per_sm {
                problems.push(format!("{what}: {block} threads per block"));
            }
            let regs = block_registers(r.registers, block);
            if regs > lim.registers_per_block {
                problems.push(format!(
                    "{what}: {regs} registers per block > {}",
                    lim.registers_per_block
                ));
            }
            // Entries that opt in to more (dynamic::shared_bytes) may use up to the opt-in ceiling.
            let dynamic = super::dynamic::shared_bytes(entry, sm);
            let shared = r.shared_bytes + rec.shared_bytes + dynamic;
            if dynamic == 0 && shared > lim.shared_per_block {
                problems.push(format!(
                    "{what}: {shared} bytes of shared memory > {} without opt-in",
                    lim.shared_per_block
                ));
            }
            if shared > lim.shared_per_block_optin {
                problems.push(format!(
                    "{what}: {shared} bytes of shared memory > {} with opt-in",
                    lim.shared_per_block_optin
                ));
            }
            if rec.max_blocks == 0 || rec.max_blocks as u64 > lim.grid_x {
                problems.push(format!("{what}: grid of {} blocks", rec.max_blocks));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::CudaLaunch;

    #[test]
    fn a_record_too_big_for_the_registers_is_a_problem() {
        static K: CudaKernel = CudaKernel {
            name: "k",
            source: "",
            entries: &["k"],
            controls: &[],
            records: &[CudaLaunch::new(1024, 1)],
        };
        let mut res = HashMap::new();
        res.insert(
            "k".to_string(),
            Resources {
                registers: 72,
                shared_bytes: 1024,
                ..Resources::default()
            },
        );
        assert_eq!(
            check(&K, of(90).unwrap(), &res).len(),
            1,
            "72 x 1024 registers do not fit"
        );
        res.get_mut("k").unwrap().registers = 32;
        assert!(check(&K, of(90).unwrap(), &res).is_empty());
        res.get_mut("k").unwrap().shared_bytes = 64 * 1024;
        assert_eq!(check(&K, of(120).unwrap(), &res).len(), 1);
        assert_eq!(check(&K, of(80).unwrap(), &HashMap::new()).len(), 1);
    }

    #[test]
    fn an_opted_in_entry_is_held_to_the_opt_in_ceiling() {
        static K: CudaKernel = CudaKernel {
            name: "fp8_gemm",
            source: "",
            entries: &["fp8_gemm"],
            controls: &[],
            records: &[CudaLaunch::new(256, 1)],
        };
        let mut res = HashMap::new();
        let r = Resources {
            registers: 168,
            ..Resources::default()
        };
        res.insert("fp8_gemm".to_string(), r);
        assert!(check(&K, of(90).unwrap(), &res).is_empty());
        res.get_mut("fp8_gemm").unwrap().shared_bytes = 120 * 1024;
        assert_eq!(
            check(&K, of(90).unwrap(), &res).len(),
            1,
            "static plus dynamic over 227 KiB"
        );
    }
}
