//! CPU building blocks: SIMD path detection, fixed-lane dot products, splitting work over threads.

mod dot;
pub mod math;
pub mod quant;
pub mod quant_simd;
mod threads;

pub use dot::{LANES, dot, dot4, reduce_lanes};
pub use threads::par_chunks_mut;

use std::fmt;
use std::sync::OnceLock;

/// An instruction-set path; every path of one kernel gives the same bits (FMA everywhere, 16 fixed lanes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimdPath {
    Portable,
    Avx2,
    /// AVX-512 F and BW.
    Avx512,
    /// AVX-512 with BF16 dot products and byte permutes (VDPBF16PS, VPERMI2B); kernels without a use for them run their AVX-512 code.
    Avx512Bf16,
}

impl SimdPath {
    /// Paths this CPU can run, portable first.
    pub fn available() -> Vec<SimdPath> {
        let mut paths = vec![SimdPath::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                paths.push(SimdPath::Avx2);
            }
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                paths.push(SimdPath::Avx512);
            }
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vbmi")
                && is_x86_feature_detected!("avx512bf16")
            {
                paths.push(SimdPath::Avx512Bf16);
            }
        }
        paths
    }

    /// The fastest path this CPU can run: AVX-512 over AVX-512-BF16 where VDPBF16PS is slower than two FMAs (Intel cores).
    pub fn best() -> SimdPath {
        static BEST: OnceLock<SimdPath> = OnceLock::new();
        *BEST.get_or_init(|| {
            let best = *SimdPath::available().last().expect("portable is always available");
            if best == SimdPath::Avx512Bf16 && slow_bf16_dot() {
                return SimdPath::Avx512;
            }
            best
        })
    }

    /// The default path of one-row GEMVs where it is not `best`: AVX2 on CPUs that run each 512-bit operation as two 256-bit halves, where the AVX2 bf16 GEMV streams weights faster (FP8 keeps its BF16 GEMV and MXFP4 its AVX-512 one: `one_row_path` of each).
    pub fn gemv_default() -> Option<SimdPath> {
        static GEMV: OnceLock<Option<SimdPath>> = OnceLock::new();
        *GEMV.get_or_init(|| {
            let wide = matches!(SimdPath::best(), SimdPath::Avx512 | SimdPath::Avx512Bf16);
            (wide && halves_512() && SimdPath::available().contains(&SimdPath::Avx2)).then_some(SimdPath::Avx2)
        })
    }
}

/// Whether this CPU splits 512-bit operations into 256-bit halves: AMD family 19h (Zen 4; Zen 3 has no AVX-512); asked once.
pub(crate) fn halves_512() -> bool {
    static HALVES: OnceLock<bool> = OnceLock::new();
    *HALVES.get_or_init(halves_512_cpuid)
}

/// A weight format whose CPU kernels have a 16-row packed layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    Fp8,
    Mxfp4,
}

impl Packing {
    /// Whether this CPU runs the format's packed kernel (where it does not, its `Packed::new` gives `None`).
    fn kernel_runs(self) -> bool {
        match self {
            Packing::Fp8 => crate::fp8_gemm::packs(),
            Packing::Mxfp4 => crate::mxfp4_gemm::packs(),
        }
    }
}

/// Whether the engine should hold 16-row packed copies of weights of `format` here: `TENSORFOLD_CPU_PACKING` (`auto`, `on`, `off`) or, by default, `packing_default`; asked once.
pub fn packing_pays(format: Packing) -> bool {
    static PAYS: OnceLock<[bool; 2]> = OnceLock::new();
    let pays = PAYS.get_or_init(|| {
        let setting = packing_setting();
        [Packing::Fp8, Packing::Mxfp4].map(|f| f.kernel_runs() && setting.unwrap_or_else(|| packing_default(f)))
    });
    pays[format as usize]
}

/// Where packing pays when not set: MXFP4 wherever its packed kernel runs; FP8 only where 512-bit operations split (Zen 4), since its packed kernel's VDPBF16PS is slow on Intel.
fn packing_default(format: Packing) -> bool {
    match format {
        Packing::Fp8 => halves_512(),
        Packing::Mxfp4 => true,
    }
}

/// `TENSORFOLD_CPU_PACKING` as `on` (`Some(true)`), `off` (`Some(false)`) or `auto` (`None`); any other value warns and counts as `auto`.
fn packing_setting() -> Option<bool> {
    let value = std::env::var("TENSORFOLD_CPU_PACKING").ok()?;
    parse_packing(&value).unwrap_or_else(|e| {
        eprintln!("warning: {e}; using auto");
        None
    })
}

/// Parses a `TENSORFOLD_CPU_PACKING` value.
fn parse_packing(value: &str) -> Result<Option<bool>, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(None),
        "on" | "1" => Ok(Some(true)),
        "off" | "0" => Ok(Some(false)),
        _ => Err(format!(
            "TENSORFOLD_CPU_PACKING={value:?} is not auto, on or off (set it to off to keep the checkpoint's row layout)"
        )),
    }
}

/// `halves_512` from CPUID, which traps to the hypervisor under KVM.
fn halves_512_cpuid() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let id = std::arch::x86_64::__cpuid(0);
        // "AuthenticAMD" as EBX, EDX, ECX.
        let amd = (id.ebx, id.edx, id.ecx) == (0x6874_7541, 0x6974_6E65, 0x444D_4163);
        let sig = std::arch::x86_64::__cpuid(1).eax;
        let family = ((sig >> 8) & 0xF) + ((sig >> 20) & 0xFF);
        return amd && family == 0x19;
    }
    #[allow(unreachable_code)]
    false
}

/// Whether this CPU's VDPBF16PS costs more than the FMAs it replaces: Intel cores run it as several uops on both vector ports.
fn slow_bf16_dot() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let id = std::arch::x86_64::__cpuid(0);
        // "GenuineIntel" as EBX, EDX, ECX.
        return (id.ebx, id.edx, id.ecx) == (0x756E_6547, 0x4965_6E69, 0x6C65_746E);
    }
    #[allow(unreachable_code)]
    false
}

impl fmt::Display for SimdPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SimdPath::Portable => "portable",
            SimdPath::Avx2 => "avx2",
            SimdPath::Avx512 => "avx512",
            SimdPath::Avx512Bf16 => "avx512bf16",
        })
    }
}

/// Work units per thread below which a serving launch stays on fewer threads.
pub const SERVING_SPLIT_MIN: usize = 65536;

/// How a CPU kernel is launched: thread count, SIMD path and rows per tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuLaunch {
    pub threads: usize,
    pub simd: SimdPath,
    pub tile_rows: usize,
    /// Least work (output values, or K/16 per GEMM output) a thread must get before a kernel splits; 0 always splits.
    pub split_min: usize,
    /// The path of one-row GEMVs where it is not `simd` (every path gives the same bits).
    pub gemv_simd: Option<SimdPath>,
    /// MXFP4 and FP8 weights held in 16-row groups (`mxfp4_gemm::Packed`, `fp8_gemm::Packed`), the same bits; other kernels ignore it.
    pub packed: bool,
}

impl CpuLaunch {
    /// One thread, best SIMD path (and this CPU's GEMV default), whole batch as one tile.
    pub fn serial() -> CpuLaunch {
        CpuLaunch {
            threads: 1,
            simd: SimdPath::best(),
            tile_rows: usize::MAX,
            split_min: 0,
            gemv_simd: SimdPath::gemv_default(),
            packed: false,
        }
    }

    /// `simd` for every call, one-row GEMVs included.
    pub fn only(self, simd: SimdPath) -> CpuLaunch {
        CpuLaunch {
            simd,
            gemv_simd: None,
            ..self
        }
    }

    /// The path of a call with `rows` activation rows.
    pub fn simd_for(&self, rows: usize) -> SimdPath {
        match rows {
            1 => self.gemv_simd.unwrap_or(self.simd),
            _ => self.simd,
        }
    }

    /// `threads` threads on the best path, splitting only work big enough to repay waking a thread.
    pub fn serving(threads: usize) -> CpuLaunch {
        CpuLaunch {
            threads: threads.max(1),
            split_min: SERVING_SPLIT_MIN,
            ..CpuLaunch::serial()
        }
    }

    /// Threads for a call with `work` units (see `split_min`): never more than `threads`, at least 1.
    pub fn split_threads(&self, work: usize) -> usize {
        if self.split_min == 0 {
            return self.threads.max(1);
        }
        self.threads.min(work / self.split_min).max(1)
    }

    /// The records the contract proves: 1 and 2 threads, every SIMD path, whole-batch and 1-row and 8-row tiles.
    pub fn records() -> Vec<CpuLaunch> {
        let mut out = Vec::new();
        for simd in SimdPath::available() {
            for threads in [1, 2] {
                for tile_rows in [usize::MAX, 1, 8] {
                    out.push(CpuLaunch {
                        threads,
                        simd,
                        tile_rows,
                        split_min: 0,
                        gemv_simd: None,
                        packed: false,
                    });
                }
            }
        }
        out
    }
}

impl fmt::Display for CpuLaunch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tile = if self.tile_rows == usize::MAX {
            "all".to_string()
        } else {
            self.tile_rows.to_string()
        };
        write!(f, "threads={} simd={} tile={}", self.threads, self.simd, tile)?;
        if let Some(g) = self.gemv_simd {
            write!(f, " gemv={g}")?;
        }
        match self.packed {
            true => write!(f, " weights=packed"),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_setting_reads_auto_on_off_and_names_the_fix_otherwise() {
        assert_eq!(parse_packing("auto"), Ok(None));
        assert_eq!(parse_packing(""), Ok(None));
        assert_eq!(parse_packing(" ON "), Ok(Some(true)));
        assert_eq!(parse_packing("0"), Ok(Some(false)));
        assert_eq!(parse_packing("off"), Ok(Some(false)));
        let e = parse_packing("yes").unwrap_err();
        assert!(e.contains("\"yes\"") && e.contains("auto, on or off"), "{e}");
        assert!(
            packing_default(Packing::Mxfp4),
            "MXFP4 packs wherever its packed kernel runs"
        );
        assert_eq!(packing_default(Packing::Fp8), halves_512());
        for f in [Packing::Fp8, Packing::Mxfp4] {
            assert!(
                f.kernel_runs() || !packing_pays(f),
                "{f:?} packs only where its kernel runs"
            );
        }
    }

    #[test]
    fn serving_launches_split_only_work_that_repays_a_thread() {
        let s = CpuLaunch::serving(4);
        assert_eq!(s.split_threads(SERVING_SPLIT_MIN - 1), 1);
        assert_eq!(s.split_threads(2 * SERVING_SPLIT_MIN), 2);
        assert_eq!(s.split_threads(100 * SERVING_SPLIT_MIN), 4);
        assert_eq!(CpuLaunch::serving(0).threads, 1);
        let always = CpuLaunch {
            threads: 2,
            ..CpuLaunch::serial()
        };
        assert_eq!(always.split_threads(1), 2, "the contract's records always split");
        assert!(CpuLaunch::records().iter().all(|r| r.split_min == 0));
    }

    #[test]
    fn one_row_calls_take_the_gemv_path_and_records_keep_theirs() {
        let wide = CpuLaunch::serial().only(SimdPath::best());
        let split = CpuLaunch {
            gemv_simd: Some(SimdPath::Portable),
            ..wide
        };
        assert_eq!((split.simd_for(1), split.simd_for(2)), (SimdPath::Portable, wide.simd));
        assert_eq!((wide.simd_for(1), wide.simd_for(64)), (wide.simd, wide.simd));
        assert_eq!(split.only(SimdPath::Portable).simd_for(1), SimdPath::Portable);
        assert!(
            CpuLaunch::records().iter().all(|r| r.gemv_simd.is_none()),
            "records prove each path as named"
        );
        assert_eq!(CpuLaunch::serving(2).gemv_simd, SimdPath::gemv_default());
        match SimdPath::gemv_default() {
            Some(g) => assert!(
                g == SimdPath::Avx2 && matches!(SimdPath::best(), SimdPath::Avx512 | SimdPath::Avx512Bf16),
                "a GEMV default {g} beside {}",
                SimdPath::best()
            ),
            None => assert!(!halves_512() || !matches!(SimdPath::best(), SimdPath::Avx512 | SimdPath::Avx512Bf16)),
        }
    }
}
