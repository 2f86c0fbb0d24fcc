//! Where a forward pass runs: the CPU, or the GPU with the model's weights resident there and activations passed per launch.

use std::sync::Arc;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::cuda::{self, CudaKernel, CudaLaunch, Gpu, Resident};

/// The device a forward pass launches its kernels on.
#[derive(Clone)]
pub enum Device {
    Cpu(CpuLaunch),
    Cuda(Arc<CudaDevice>),
}

/// The process GPU and the model's weights resident on it.
pub struct CudaDevice {
    pub gpu: &'static Gpu,
    pub resident: Resident,
}

impl CudaDevice {
    /// The process GPU, or why CUDA is unavailable.
    pub fn open() -> Result<CudaDevice, String> {
        Ok(CudaDevice {
            gpu: cuda::gpu()?,
            resident: Resident::default(),
        })
    }
}

impl Device {
    /// The GPU, for a device that has one.
    pub fn cuda(&self) -> Option<&CudaDevice> {
        match self {
            Device::Cpu(_) => None,
            Device::Cuda(c) => Some(c),
        }
    }

    /// The CPU launch of a CPU device.
    pub fn cpu(&self) -> Option<&CpuLaunch> {
        match self {
            Device::Cpu(l) => Some(l),
            Device::Cuda(_) => None,
        }
    }
}

impl From<CpuLaunch> for Device {
    fn from(l: CpuLaunch) -> Device {
        Device::Cpu(l)
    }
}

/// The geometry the forward pass launches `kernel` with: its first launch record (one block per item, grid capped at 65535).
pub(crate) fn record(kernel: &'static CudaKernel) -> &'static CudaLaunch {
    &kernel.records[0]
}

/// Panics with the kernel's name on a CUDA failure; the runner turns the panic into the pass's error.
pub(crate) fn ok(name: &str, r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{name} on CUDA failed: {e}");
    }
}
