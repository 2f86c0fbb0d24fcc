//! NVRTC compilation of a kernel's CUDA C to a cubin for one architecture, cached on disk by source hash and arch.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::nvrtc::sys;
use sha2::{Digest, Sha256};

use super::CudaKernel;

/// Declarations every kernel may use (bf16 and FP8 bit conversions, block reductions); no CUDA headers needed.
const PRELUDE: &str = include_str!("prelude.cuh");

/// A compiled module: the cubin and ptxas' report of each entry's resources.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    pub resources: HashMap<String, Resources>,
}

/// What ptxas reports for one entry point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: u32,
    pub shared_bytes: u32,
    pub stack_bytes: u32,
    pub spill_bytes: u32,
}

/// The full source NVRTC compiles for `kernel`.
pub fn full_source(kernel: &CudaKernel) -> String {
    format!("{PRELUDE}\n#line 1 \"{}.cu\"\n{}", kernel.name, kernel.source)
}

/// NVRTC's target for `arch`: Hopper's arch-specific `sm_90a` (wgmma), the plain `sm_{arch}` elsewhere.
pub fn target(arch: u32) -> String {
    if arch == 90 {
        "sm_90a".into()
    } else {
        format!("sm_{arch}")
    }
}

fn options(arch: u32, fault: Option<&str>) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={}", target(arch)),
        "--std=c++17".into(),
        // Contraction into FMA is left to the source (explicit fmaf), so bits do not depend on the compiler's choices.
        "--fmad=false".into(),
        "--ptxas-options=--verbose".into(),
    ];
    if let Some(f) = fault {
        o.push(format!("-DTF_FAULT_{f}=1"));
    }
    o
}

fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    (major, minor)
}

/// Where compiled modules are kept: `TENSORFOLD_CUDA_CACHE`, else `$XDG_CACHE_HOME` or `~/.cache` under `tensorfold/cuda`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TENSORFOLD_CUDA_CACHE") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tensorfold").join("cuda"))
}

/// Compiles `kernel` for `sm_{arch}` (with planted control `fault` defined), from the disk cache when there.
pub fn compile(kernel: &CudaKernel, arch: u32, fault: Option<&str>) -> Result<Compiled, String> {
    super::libs::nvrtc()?;
    let source = full_source(kernel);
    let opts = options(arch, fault);
    let mut h = Sha256::new();
    h.update(format!("{:?}\0{opts:?}\0", nvrtc_version()));
    h.update(source.as_bytes());
    let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let stem = format!("{}-sm_{arch}-{}", kernel.name, &key[..32]);
    let dir = cache_dir();
    if let Some(dir) = &dir
        && let (Ok(cubin), Ok(log)) = (
            std::fs::read(dir.join(format!("{stem}.cubin"))),
            std::fs::read_to_string(dir.join(format!("{stem}.log"))),
        )
    {
        return Ok(Compiled {
            cubin,
            resources: parse_resources(&log),
        });
    }
    let (cubin, log) = nvrtc_cubin(&source, kernel.name, &opts)?;
    if let Some(dir) = &dir {
        // A cache that cannot be written only costs a compile next time.
        let _ = write_atomic(dir, &format!("{stem}.log"), log.as_bytes())
            .and_then(|_| write_atomic(dir, &format!("{stem}.cubin"), &cubin));
    }
    Ok(Compiled {
        cubin,
        resources: parse_resources(&log),
    })
}

/// Writes `dir/name` by a rename from a temporary file that no other writer, thread or process, shares.
fn write_atomic(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicUsize = AtomicUsize::new(0);
    std::fs::create_dir_all(dir)?;
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, dir.join(name))
}

fn check(r: sys::nvrtcResult, what: &str) -> Result<(), String> {
    if r == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(format!("NVRTC {what}: {r:?}"))
    }
}

/// One NVRTC compile to a cubin; returns it with the compile log (ptxas' resource report included).
fn nvrtc_cubin(source: &str, name: &str, opts: &[String]) -> Result<(Vec<u8>, String), String> {
    let src = CString::new(source).map_err(|_| "CUDA source holds a NUL byte".to_string())?;
    let file = CString::new(format!("{name}.cu")).expect("kernel names hold no NUL");
    let c_opts: Vec<CString> = opts.iter().map(|o| CString::new(o.as_str()).expect("no NUL")).collect();
    let ptrs: Vec<*const c_char> = c_opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer outlives the calls; the program is destroyed on every path below.
    unsafe {
        check(
            sys::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                file.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            ),
            "create program",
        )?;
        let compiled = sys::nvrtcCompileProgram(prog, ptrs.len() as i32, ptrs.as_ptr());
        let mut log_len = 0usize;
        sys::nvrtcGetProgramLogSize(prog, &mut log_len);
        let mut log = vec![0 as c_char; log_len.max(1)];
        sys::nvrtcGetProgramLog(prog, log.as_mut_ptr());
        let log = CStr::from_ptr(log.as_ptr()).to_string_lossy().into_owned();
        let result = if compiled != sys::nvrtcResult::NVRTC_SUCCESS {
            Err(format!("{name}.cu does not compile ({}):\n{log}", opts[0]))
        } else {
            let mut size = 0usize;
            check(sys::nvrtcGetCUBINSize(prog, &mut size), "cubin size")
                .and_then(|_| {
                    let mut cubin = vec![0u8; size];
                    check(sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char), "get cubin").map(|_| cubin)
                })
                .map(|cubin| (cubin, log))
        };
        sys::nvrtcDestroyProgram(&mut prog);
        result
    }
}

/// Reads ptxas' `--verbose` report: per entry, registers, shared memory, stack frame and spills.
pub fn parse_resources(log: &str) -> HashMap<String, Resources> {
    let mut out: HashMap<String, Resources> = HashMap::new();
    let mut current: Option<String> = None;
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let at = line.find(unit)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            current = rest.split('\'').next().map(str::to_string);
            continue;
        }
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            current = Some(rest.trim().to_string());
            continue;
        }
        let Some(name) = &current else { continue };
        let r = out.entry(name.clone()).or_default();
        if line.contains("Used") && line.contains("registers") {
            r.registers = number_before(line, "registers").unwrap_or(0);
            r.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
        }
        if line.contains("stack frame") {
            r.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            r.spill_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_writing_one_cache_file_leave_one_whole_copy() {
        let dir = std::env::temp_dir().join(format!("tf-cache-race-{}", std::process::id()));
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let dir = &dir;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(dir, "k.cubin", &vec![t; 1 << 20]).unwrap();
                    }
                });
            }
        });
        let got = std::fs::read(dir.join("k.cubin")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got.len(), 1 << 20, "a torn write");
        assert!(got.iter().all(|&b| b == got[0]), "bytes of two writes in one file");
    }

    #[test]
    fn reads_the_ptxas_report() {
        let log = "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Function properties for k\nptxas         .     16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\nptxas info    : Used 9 registers, used 1 barriers, 1024 bytes smem, 372 bytes cmem[0]\n";
        let r = parse_resources(log)["k"];
        assert_eq!(
            r,
            Resources {
                registers: 9,
                shared_bytes: 1024,
                stack_bytes: 16,
                spill_bytes: 8
            }
        );
    }
}
