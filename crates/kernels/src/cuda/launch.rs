//! Kernel launches through `cuLaunchKernelEx`, programmatic on sm_90+: the next kernel's blocks may start while this one ends.

use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::driver::sys::{self, CUlaunchAttributeID};
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DriverError, LaunchConfig,
};

use super::args::Staged;
use super::device::Gpu;

/// Whether launches chain programmatically: sm_90 and newer, unless `TENSORFOLD_PDL=0`.
pub fn programmatic(arch: u32) -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    arch >= 90 && !*OFF.get_or_init(|| std::env::var("TENSORFOLD_PDL").is_ok_and(|v| v == "0"))
}

/// One kernel launch being built: the function, its stream, and each argument's bytes (at most 8 each).
pub struct Launch<'a> {
    stream: &'a CudaStream,
    func: &'a CudaFunction,
    chained: bool,
    args: Vec<u64>,
}

/// A value a kernel takes as an argument: a device buffer's address or a scalar.
pub trait KernelArg {
    /// The argument's bytes, little-endian in the low bytes.
    fn bits(&self, stream: &CudaStream) -> u64;
}

impl<T> KernelArg for &CudaSlice<T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for &mut CudaSlice<T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for &CudaView<'_, T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for &mut CudaViewMut<'_, T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

macro_rules! scalar_args {
    ($($t:ty => $u:ty),*) => {$(
        impl KernelArg for &$t {
            fn bits(&self, _: &CudaStream) -> u64 {
                <$u>::from_ne_bytes(self.to_ne_bytes()) as u64
            }
        }
    )*};
}
scalar_args!(i32 => u32, u32 => u32, f32 => u32, i64 => u64, u64 => u64, f64 => u64, usize => usize, u16 => u16, u8 => u8);

impl<'a> Launch<'a> {
    /// Appends `a` as the next argument.
    pub fn arg(&mut self, a: impl KernelArg) -> &mut Self {
        self.args.push(a.bits(self.stream));
        self
    }

    /// Appends a staged input buffer as the next argument.
    pub fn input<T>(&mut self, x: &Staged<'_, T>) -> &mut Self {
        match x {
            Staged::Owned(s) => self.arg(s),
            Staged::View(v) => self.arg(v),
        }
    }

    /// Queues the kernel on the stream.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in number, order and type, and every buffer must hold what the kernel indexes.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), DriverError> {
        self.stream.context().bind_to_thread()?;
        let mut params: Vec<*mut c_void> = self.args.iter_mut().map(|a| (a as *mut u64).cast()).collect();
        // SAFETY: a zeroed attribute is a valid value; its id and the one field read for that id are set below.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: self.chained as u32,
        };
        // SAFETY: `params` points at one 8-byte slot per argument, alive across the call; the caller vouches for the types.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
    }
}

impl Gpu {
    /// A launch of `func` on the stream work goes to now, chained programmatically to the kernel before it where the GPU allows.
    pub fn launch_builder<'a>(&'a self, func: &'a CudaFunction) -> Launch<'a> {
        Launch {
            stream: self.work(),
            func,
            chained: self.chains(),
            args: Vec::with_capacity(16),
        }
    }
}
