//! What ranks on several GPUs need before anything touches NCCL: the driver, enough GPUs and a loadable NCCL.

use cudarc::driver::CudaContext;

use super::libs;

/// How many GPUs the driver reports, or why there are none.
pub fn gpu_count() -> Result<usize, String> {
    libs::driver()?;
    Ok(CudaContext::device_count()
        .map_err(|e| format!("device count: {e:?}"))?
        .max(0) as usize)
}

/// Whether ranks on the GPUs `ordinals` could join over NCCL here, or why not.
pub fn multi_gpu(ordinals: &[usize]) -> Result<(), String> {
    let count = gpu_count()?;
    if let Some(o) = ordinals.iter().find(|&&o| o >= count) {
        return Err(format!(
            "{} ranks on GPUs {ordinals:?} need GPU {o}; the driver reports {count}",
            ordinals.len()
        ));
    }
    libs::nccl()
}
