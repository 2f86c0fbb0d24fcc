//! Finds libcuda and libnvrtc before cudarc touches them (cudarc panics on a missing library).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The NVRTC library and its builtins, as the CUDA 13 toolkit and the `nvidia-cuda-nvrtc` wheel name them.
const NVRTC: &str = "libnvrtc.so.13";
const NVRTC_BUILTINS: &str = "libnvrtc-builtins.so.13.0";

/// Folders searched for NVRTC when the loader cannot find it by name.
fn nvrtc_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("TENSORFOLD_NVRTC_DIR") {
        dirs.push(PathBuf::from(d));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(Path::new(&d).join("lib64"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    dirs
}

/// Loads `path` globally and keeps it loaded, so that later loads by soname find it.
fn preload(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
        // SAFETY: NVRTC's initialisers only set up its own state; the handle is leaked so it stays loaded.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
        std::mem::forget(lib);
        Ok(())
    }
    #[cfg(not(unix))]
    {
        Err(format!("cannot preload {} on this platform", path.display()))
    }
}

/// Whether NVRTC can be used, or why not; searches `nvrtc_dirs` when the loader alone does not find it.
pub fn nvrtc() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            // SAFETY: only tries to load the library by its candidate names; nothing is called.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                return Ok(());
            }
            for dir in nvrtc_dirs() {
                let (lib, builtins) = (dir.join(NVRTC), dir.join(NVRTC_BUILTINS));
                if lib.exists() {
                    if builtins.exists() {
                        preload(&builtins)?;
                    }
                    preload(&lib)?;
                    // SAFETY: as above.
                    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                        return Ok(());
                    }
                }
            }
            Err(format!(
                "NVRTC ({NVRTC}) not found: install the CUDA 13 toolkit, or `pip install nvidia-cuda-nvrtc==13.0.88` and set TENSORFOLD_NVRTC_DIR to its nvidia/cu13/lib folder"
            ))
        })
        .clone()
}

/// Whether the CUDA driver library can be loaded, or why not.
pub fn driver() -> Result<(), String> {
    // SAFETY: only tries to load the library by its candidate names; nothing is called.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("libcuda.so not found: no NVIDIA driver on this machine".into())
    }
}

/// Folders searched for NCCL's `libnccl.so.2` to say where it is when the loader cannot find it as cudarc names it.
fn nccl_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("TENSORFOLD_NCCL_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push("/usr/lib/x86_64-linux-gnu".into());
    dirs.push("/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib".into());
    dirs.push("/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib".into());
    dirs
}

/// Whether cudarc can load NCCL (it asks the loader for `libnccl.so`), or why not and the fix.
pub fn nccl() -> Result<(), String> {
    // SAFETY: only tries to load the library by its candidate names; nothing is called.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Ok(());
    }
    let found = nccl_dirs()
        .into_iter()
        .map(|d| d.join("libnccl.so.2"))
        .find(|p| p.exists());
    Err(match found {
        Some(p) => format!(
            "NCCL is at {} but the loader finds no `libnccl.so`: link it as libnccl.so in a folder and put that folder on LD_LIBRARY_PATH",
            p.display()
        ),
        None => "NCCL (libnccl.so) not found: install libnccl2 or the nvidia-nccl-cu13 wheel, link its libnccl.so.2 as libnccl.so on LD_LIBRARY_PATH".into(),
    })
}
