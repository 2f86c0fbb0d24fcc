//! The CUDA backend: NVRTC-compiled kernels (cached on disk), device buffers and launches, through cudarc with dynamic loading.

mod ahead;
mod args;
mod beside;
mod compile;
mod device;
pub mod dynamic;
mod graph;
mod launch;
mod libs;
mod ranks;
mod readback;
mod resident;
mod timeline;

pub use libs::nvrtc as nvrtc_available;
pub use ranks::{gpu_count, multi_gpu};
pub mod nccl;
pub use libs::nccl as nccl_available;
pub mod limits;

pub use args::{In, Out, Quantised, Staged, StagedOut};
pub use beside::Branch;
pub use compile::{Compiled, Resources, cache_dir, compile, full_source, target};
pub use device::{DeviceOut, Gpu, Guarded, gpu, select};
pub use graph::{Graph, Turn, chaining, holds_turn, turn};
pub use launch::{KernelArg, Launch, programmatic};
pub use resident::Resident;
pub use timeline::{Mark, record_marks};

use std::fmt;

/// The architectures the contract checks limits against (and CI compiles for).
pub const ARCHS: [u32; 6] = [80, 86, 89, 90, 100, 120];

/// A kernel's CUDA side: its source, entry points, planted controls and launch records.
pub struct CudaKernel {
    /// The registry name; also the source file's and every entry point's prefix.
    pub name: &'static str,
    pub source: &'static str,
    pub entries: &'static [&'static str],
    /// Planted controls, each compiled in only with `-DTF_FAULT_<name>` (contract build).
    pub controls: &'static [&'static str],
    pub records: &'static [CudaLaunch],
}

/// A CUDA launch geometry: threads per block, the most blocks the grid may have, and dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaLaunch {
    pub block: u32,
    /// Work items (rows, heads, ...) past this many blocks loop inside the kernel, so one block may do several.
    pub max_blocks: u32,
    pub shared_bytes: u32,
}

impl CudaLaunch {
    pub const fn new(block: u32, max_blocks: u32) -> CudaLaunch {
        CudaLaunch {
            block,
            max_blocks,
            shared_bytes: 0,
        }
    }

    /// Blocks for `items` independent work items.
    pub fn grid(&self, items: usize) -> u32 {
        (items.max(1) as u64).min(self.max_blocks as u64) as u32
    }

    /// The cudarc launch configuration for `items` work items.
    pub fn config(&self, items: usize) -> cudarc::driver::LaunchConfig {
        cudarc::driver::LaunchConfig {
            grid_dim: (self.grid(items), 1, 1),
            block_dim: (self.block, 1, 1),
            shared_mem_bytes: self.shared_bytes,
        }
    }
}

impl fmt::Display for CudaLaunch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cuda block={} blocks<={}", self.block, self.max_blocks)?;
        if self.shared_bytes > 0 {
            write!(f, " smem={}", self.shared_bytes)?;
        }
        Ok(())
    }
}

/// Grid caps most row-parallel kernels record: one block, a prime number of blocks, one block per row.
pub const ROW_GRIDS: [u32; 3] = [1, 7, 65_535];

/// Maps a launch's driver error to the contract's message form.
pub fn launched<T>(entry: &str, r: Result<T, cudarc::driver::DriverError>) -> Result<(), String> {
    r.map(|_| timeline::kernel_mark(entry))
        .map_err(|e| format!("CUDA launch of {entry}: {e:?}"))
}
