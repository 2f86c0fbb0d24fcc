//! Where a forward pass runs: the CPU, or the GPU with the model's weights resident there and its activations kept there for the pass.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaSlice;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::cuda::{self, CudaKernel, CudaLaunch, Gpu, Resident};

/// The device a forward pass launches its kernels on.
#[derive(Clone)]
pub enum Device {
    Cpu(CpuLaunch),
    Cuda(Arc<CudaDevice>),
}

/// Device address tables of expert matrices, by the MoE's address and matrix.
pub(crate) type ExpertTables = HashMap<(usize, super::slots::Matrix), Arc<CudaSlice<u64>>>;

/// The process GPU and the model's weights resident on it.
pub struct CudaDevice {
    pub gpu: &'static Gpu,
    pub resident: Resident,
    /// Device address tables of each MoE's expert matrices, by the MoE's address and matrix.
    pub(crate) tables: Mutex<ExpertTables>,
    /// Captured decode shapes, replayed as graphs.
    pub(crate) replays: super::graph::Replays,
}

impl CudaDevice {
    /// CUDA device `ordinal`, or why CUDA is unavailable; `TENSORFOLD_CUDA_GRAPHS=0` turns graph replay off.
    pub fn open(ordinal: usize) -> Result<CudaDevice, String> {
        let d = CudaDevice {
            gpu: cuda::select(ordinal)?,
            resident: Resident::default(),
            tables: Mutex::default(),
            replays: Default::default(),
        };
        d.set_graphs(std::env::var("TENSORFOLD_CUDA_GRAPHS").map_or(true, |v| v.trim() != "0"));
        Ok(d)
    }
}

impl Drop for CudaDevice {
    /// Frees the weights, tables and graphs in the process stream's turn, so a capture on another thread records none of the frees.
    fn drop(&mut self) {
        let _turn = cuda::turn();
        drop(std::mem::take(&mut self.resident));
        drop(std::mem::take(self.tables.get_mut().unwrap_or_else(|p| p.into_inner())));
        drop(std::mem::take(&mut self.replays));
    }
}

/// What `--device` asks for: `cpu`, `cuda` (device 0) or `cuda:N`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    #[default]
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<DeviceSpec, String> {
        match s.trim() {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceSpec::Cuda)
                .ok_or_else(|| format!("unknown device `{other}`: use cpu, cuda or cuda:N (N a device number)")),
        }
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceSpec {
    /// Opens the device; the CPU serves with `threads` threads; a GPU that cannot be used says why and what to do.
    pub fn open(self, threads: usize) -> Result<Device, String> {
        match self {
            DeviceSpec::Cpu => Ok(Device::Cpu(CpuLaunch::serving(threads.max(1)))),
            DeviceSpec::Cuda(n) => CudaDevice::open(n)
                .map(|c| Device::Cuda(Arc::new(c)))
                .map_err(|why| format!("--device {self}: CUDA is unavailable: {why}; run with --device cpu")),
        }
    }

    /// A one-line description of an opened device.
    pub fn describe(device: &Device) -> String {
        match device {
            Device::Cpu(l) => format!("cpu ({} threads)", l.threads),
            Device::Cuda(c) => format!("cuda:{} ({}, sm_{})", c.gpu.ordinal, c.gpu.name, c.gpu.arch),
        }
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

    /// Records a timeline mark named by `label` on a GPU while marks are recorded (`cuda::record_marks`).
    pub(crate) fn mark(&self, label: impl FnOnce() -> String) {
        if let Some(c) = self.cuda() {
            c.gpu.mark(label);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_specs_parse_and_bad_ones_say_the_fix() {
        assert_eq!("cpu".parse::<DeviceSpec>(), Ok(DeviceSpec::Cpu));
        assert_eq!("cuda".parse::<DeviceSpec>(), Ok(DeviceSpec::Cuda(0)));
        assert_eq!("cuda:3".parse::<DeviceSpec>(), Ok(DeviceSpec::Cuda(3)));
        assert_eq!(DeviceSpec::Cuda(3).to_string(), "cuda:3");
        for bad in ["gpu", "cuda:", "cuda:x", "cuda3"] {
            let e = bad.parse::<DeviceSpec>().unwrap_err();
            assert!(e.contains("use cpu, cuda or cuda:N"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_cuda_device_that_cannot_open_says_why_and_the_fix() {
        match DeviceSpec::Cuda(0).open(1) {
            Ok(d) => eprintln!("CUDA is present here ({}); nothing to refuse", DeviceSpec::describe(&d)),
            Err(e) => assert!(e.contains("CUDA is unavailable") && e.contains("--device cpu"), "{e}"),
        }
    }
}
