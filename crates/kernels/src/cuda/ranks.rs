//! What ranks on several GPUs need before anything touches NCCL: the driver, enough GPUs and a loadable libnccl.

use cudarc::driver::CudaContext;

use super::libs;

/// The NCCL library as its packages name it.
const NCCL: &str = "libnccl.so.2";

/// Whether `ranks` GPUs joined over NCCL could serve here, or why not.
pub fn multi_gpu(ranks: usize) -> Result<(), String> {
    libs::driver()?;
    let count = CudaContext::device_count()
        .map_err(|e| format!("device count: {e:?}"))?
        .max(0) as usize;
    if count < ranks {
        return Err(format!("{ranks} ranks need {ranks} GPUs; the driver reports {count}"));
    }
    // SAFETY: NCCL's initialisers only set up its own state; the library is closed again at once.
    match unsafe { libloading::Library::new(NCCL) } {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "{NCCL} cannot be loaded ({e}); install NCCL (the nvidia-nccl-cu13 wheel or libnccl2)"
        )),
    }
}
