//! The process's GPU: context, stream, modules loaded from NVRTC cubins, and guarded device buffers.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::result::function::get_function_attribute;
use cudarc::driver::sys::CUfunction_attribute as Attr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, CudaViewMut, DeviceRepr, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;

use super::{CudaKernel, CudaLaunch, compile, libs};
use crate::faults::Faults;

/// Loaded modules by kernel name and planted control.
type Modules = HashMap<(&'static str, Option<&'static str>), Arc<CudaModule>>;

/// Looked-up entry points by kernel name, planted control and entry.
type Functions = HashMap<(&'static str, Option<&'static str>, &'static str), CudaFunction>;

/// One GPU with its stream and the modules loaded so far (one per kernel and planted control).
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// The stream a `beside` branch queues on.
    pub(crate) side: Arc<CudaStream>,
    /// Compute capability as `major * 10 + minor` (90 on the H100 and H200).
    pub arch: u32,
    pub name: String,
    /// The device's number in the driver's list.
    pub ordinal: usize,
    /// Streaming multiprocessors.
    pub sms: u32,
    modules: Mutex<Modules>,
    functions: Mutex<Functions>,
    /// Whether this process's stream is being captured into a graph.
    pub(crate) capturing: AtomicBool,
    /// Whether captures record programmatic chains (cleared when a chained capture fails).
    pub(crate) chain_captures: AtomicBool,
    /// Timeline marks recorded so far.
    pub(crate) marks: super::timeline::Marks,
    /// Page-locked host bytes that read-backs land in.
    pub(crate) landing: super::readback::Landing,
    /// The stream and buffers of uploads that go ahead of the process stream.
    pub(crate) ahead: super::ahead::Ahead,
}

pub(crate) fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> String + '_ {
    move |e| format!("CUDA {what}: {e:?}")
}

/// The device `select` chose, if it ran before the GPU was opened.
static SELECTED: OnceLock<usize> = OnceLock::new();

/// The GPU chosen by `select`, else named by `TENSORFOLD_CUDA_DEVICE` (default 0), opened once; `Err` says why CUDA is unavailable.
pub fn gpu() -> Result<&'static Gpu, String> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    GPU.get_or_init(open).as_ref().map_err(Clone::clone)
}

/// Chooses CUDA device `ordinal` for this process and opens it; fails when another one is already chosen or it cannot be opened.
pub fn select(ordinal: usize) -> Result<&'static Gpu, String> {
    let chosen = *SELECTED.get_or_init(|| ordinal);
    if chosen != ordinal {
        return Err(format!(
            "CUDA device {chosen} is already in use by this process; one process drives one GPU"
        ));
    }
    let gpu = gpu()?;
    if gpu.ordinal != ordinal {
        return Err(format!(
            "CUDA device {} is already in use by this process; one process drives one GPU",
            gpu.ordinal
        ));
    }
    Ok(gpu)
}

fn open() -> Result<Gpu, String> {
    libs::driver()?;
    libs::nvrtc()?;
    let count = CudaContext::device_count().map_err(driver_err("device count"))?;
    let ordinal: usize = match (SELECTED.get(), std::env::var("TENSORFOLD_CUDA_DEVICE")) {
        (Some(&o), _) => o,
        (None, Ok(v)) => v
            .parse()
            .map_err(|_| format!("TENSORFOLD_CUDA_DEVICE={v} is not a device number"))?,
        (None, Err(_)) => 0,
    };
    if ordinal >= count.max(0) as usize {
        return Err(format!("no CUDA device {ordinal}: the driver reports {count} devices"));
    }
    let ctx = CudaContext::new(ordinal).map_err(driver_err("context"))?;
    let (major, minor) = ctx.compute_capability().map_err(driver_err("compute capability"))?;
    let arch = (major * 10 + minor) as u32;
    if arch < 80 {
        return Err(format!(
            "CUDA device {ordinal} is sm_{arch}; TensorFold needs sm_80 or newer"
        ));
    }
    let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
    let sms = ctx
        .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(driver_err("multiprocessor count"))?
        .max(1) as u32;
    // SAFETY: work goes through the process stream, or a `beside` branch whose buffers stay inside it and which joins back with events.
    unsafe { ctx.disable_event_tracking() };
    // A device without memory pools allocates synchronously: slower, the same results.
    keep_freed_memory(&ctx).ok();
    // A stream of its own rather than the legacy default one, which cannot be captured into graphs.
    let stream = ctx.new_stream().map_err(driver_err("stream"))?;
    let side = ctx.new_stream().map_err(driver_err("stream"))?;
    let ahead = super::ahead::Ahead::new(ctx.new_stream().map_err(driver_err("stream"))?);
    Ok(Gpu {
        ctx,
        stream,
        side,
        arch,
        name,
        ordinal,
        sms,
        modules: Mutex::new(HashMap::new()),
        functions: Mutex::new(HashMap::new()),
        capturing: AtomicBool::new(false),
        chain_captures: AtomicBool::new(true),
        marks: Default::default(),
        landing: Default::default(),
        ahead,
    })
}

/// Keeps memory that passes free in the device's pool, so a pass after a synchronisation allocates without mapping pages again.
fn keep_freed_memory(ctx: &CudaContext) -> Result<(), String> {
    use cudarc::driver::sys;
    ctx.bind_to_thread().map_err(driver_err("context"))?;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` receives the handle of the context's device's default pool.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
        .result()
        .map_err(driver_err("memory pool"))?;
    let mut threshold = u64::MAX;
    let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
    // SAFETY: the release threshold attribute takes a pointer to a u64 that lives across the call.
    unsafe { sys::cuMemPoolSetAttribute(pool, attr, (&mut threshold as *mut u64).cast()) }
        .result()
        .map_err(driver_err("memory pool"))
}

/// A device value that fills guard bands: a finite pattern a kernel is unlikely to write.
pub trait Guarded: DeviceRepr + ValidAsZeroBits + Copy + PartialEq + Unpin {
    const GUARD: Self;
}
impl Guarded for f32 {
    const GUARD: f32 = f32::from_bits(0xA5A5_A5A5);
}
impl Guarded for u8 {
    const GUARD: u8 = 0xA5;
}
impl Guarded for u16 {
    const GUARD: u16 = 0xA5A5;
}
impl Guarded for i32 {
    const GUARD: i32 = 0x25A5_A5A5;
}
impl Guarded for u32 {
    const GUARD: u32 = 0xA5A5_A5A5;
}

/// Elements of guard band on each side of a device output.
const GUARD_LEN: usize = 256;

/// A device output with guard bands, starting as the host buffer's contents (the contract's poison).
pub struct DeviceOut<T: Guarded> {
    buf: CudaSlice<T>,
    len: usize,
}

impl<T: Guarded> DeviceOut<T> {
    /// The output elements, for a kernel argument.
    pub fn view(&mut self) -> CudaViewMut<'_, T> {
        self.buf.slice_mut(GUARD_LEN..GUARD_LEN + self.len)
    }

    /// Copies the result into `out`; fails when the kernel wrote into a guard band.
    pub fn finish(self, gpu: &Gpu, out: &mut [T]) -> Result<(), String> {
        let all = gpu.stream.clone_dtoh(&self.buf).map_err(driver_err("copy back"))?;
        if let Some(i) = (0..GUARD_LEN)
            .chain(GUARD_LEN + self.len..all.len())
            .find(|&i| all[i] != T::GUARD)
        {
            let side = if i < GUARD_LEN { "before" } else { "after" };
            return Err(format!("the kernel wrote into the device guard band {side} its output"));
        }
        out.copy_from_slice(&all[GUARD_LEN..GUARD_LEN + self.len]);
        Ok(())
    }
}

impl Gpu {
    /// Entry `entry` of `kernel`, compiled for this GPU with the planted control in `faults` if it is one of the kernel's.
    pub fn function(&self, kernel: &'static CudaKernel, entry: &str, faults: Faults) -> Result<CudaFunction, String> {
        let entry: &'static str = kernel
            .entries
            .iter()
            .copied()
            .find(|e| *e == entry && e.starts_with(kernel.name))
            .unwrap_or_else(|| panic!("{entry} is not a registered entry of {}", kernel.name));
        let fault = faults
            .active()
            .and_then(|f| kernel.controls.iter().copied().find(|c| *c == f));
        let key = (kernel.name, fault, entry);
        if let Some(f) = self.functions.lock().expect("function cache poisoned").get(&key) {
            return Ok(f.clone());
        }
        let module = {
            let mut modules = self.modules.lock().expect("module cache poisoned");
            match modules.get(&(kernel.name, fault)) {
                Some(m) => m.clone(),
                None => {
                    let compiled = compile::compile(kernel, self.arch, fault)?;
                    let m = self
                        .ctx
                        .load_module(Ptx::from_binary(compiled.cubin))
                        .map_err(driver_err("module load"))?;
                    modules.insert((kernel.name, fault), m.clone());
                    m
                }
            }
        };
        let f = module.load_function(entry).map_err(driver_err("function lookup"))?;
        let dynamic = super::dynamic::shared_bytes(entry, self.arch);
        if dynamic > 48 * 1024 {
            f.set_attribute(Attr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic as i32)
                .map_err(driver_err("dynamic shared memory opt-in"))?;
        }
        self.functions
            .lock()
            .expect("function cache poisoned")
            .insert(key, f.clone());
        Ok(f)
    }

    /// `launch`'s configuration for `items` work items of `entry`, with the dynamic shared memory, threads and blocks it takes on this GPU.
    pub fn config(&self, launch: &CudaLaunch, entry: &str, items: usize) -> cudarc::driver::LaunchConfig {
        let mut c = launch.config(items);
        c.shared_mem_bytes += super::dynamic::shared_bytes(entry, self.arch);
        c.block_dim.0 = super::dynamic::threads(entry, self.arch, c.block_dim.0);
        if super::dynamic::one_block_an_sm(entry, self.arch) {
            c.grid_dim.0 = c.grid_dim.0.min(self.sms.max(1));
        }
        c
    }

    /// Copies `host` to a new device buffer (one zero element when empty, so the pointer is valid).
    pub fn upload<T: DeviceRepr + ValidAsZeroBits + Unpin>(&self, host: &[T]) -> Result<CudaSlice<T>, String> {
        upload_on(self.work(), host)
    }

    /// A new zeroed device buffer of `len` elements (at least one), filled on the stream without a host copy.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>, String> {
        self.work().alloc_zeros(len.max(1)).map_err(driver_err("alloc"))
    }

    /// A device buffer of `len` elements (at least one) for a kernel that writes all of them: not cleared first.
    pub fn scratch<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>, String> {
        // SAFETY: callers hand the buffer to a kernel that writes every element before anything reads it.
        unsafe { self.work().alloc(len.max(1)) }.map_err(driver_err("alloc"))
    }

    /// Quantised-activation scratch: f16 rows of `k` padded to 8 (the padding must read as zeros) and one scale a 128-block.
    pub fn quant_scratch(&self, rows: usize, k: usize) -> Result<(CudaSlice<u16>, CudaSlice<f32>), String> {
        let q = if k.is_multiple_of(8) {
            self.scratch(rows * k)?
        } else {
            self.zeros(rows * k.next_multiple_of(8))?
        };
        Ok((q, self.scratch(rows * k.div_ceil(128))?))
    }

    /// A guarded device output holding `host`'s current contents.
    pub fn output<T: Guarded>(&self, host: &[T]) -> Result<DeviceOut<T>, String> {
        let mut init = vec![T::GUARD; host.len() + 2 * GUARD_LEN];
        init[GUARD_LEN..GUARD_LEN + host.len()].copy_from_slice(host);
        Ok(DeviceOut {
            buf: self.stream.clone_htod(&init).map_err(driver_err("upload"))?,
            len: host.len(),
        })
    }

    /// Waits for the stream and reports any launch or execution error.
    pub fn sync(&self) -> Result<(), String> {
        self.stream.synchronize().map_err(driver_err("kernel execution"))
    }

    /// The loaded function's own attributes: (max threads per block, registers, static shared bytes, local bytes).
    pub fn attributes(&self, f: &CudaFunction) -> Result<(u32, u32, u32, u32), String> {
        let get = |a| {
            // SAFETY: the function handle is alive for the call.
            unsafe { get_function_attribute(f.cu_function(), a) }
                .map(|v| v.max(0) as u32)
                .map_err(driver_err("function attribute"))
        };
        Ok((
            get(Attr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            get(Attr::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            get(Attr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            get(Attr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
        ))
    }
}

impl Gpu {
    /// Device-to-device copy speed over a buffer of `bytes`: bytes copied per second (each is read once and written once).
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, String> {
        let src = self.stream.alloc_zeros::<u8>(bytes).map_err(driver_err("alloc"))?;
        let mut dst = self.stream.alloc_zeros::<u8>(bytes).map_err(driver_err("alloc"))?;
        self.stream.memcpy_dtod(&src, &mut dst).map_err(driver_err("copy"))?;
        self.sync()?;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            self.stream.memcpy_dtod(&src, &mut dst).map_err(driver_err("copy"))?;
        }
        self.sync()?;
        Ok((bytes * reps) as f64 / t.elapsed().as_secs_f64())
    }
}

/// `host` copied to a new buffer on `stream` (one zero element when empty, so the pointer is valid).
pub(super) fn upload_on<T: DeviceRepr + ValidAsZeroBits + Unpin>(
    stream: &Arc<CudaStream>,
    host: &[T],
) -> Result<CudaSlice<T>, String> {
    if host.is_empty() {
        return stream.alloc_zeros(1).map_err(driver_err("alloc"));
    }
    stream.clone_htod(host).map_err(driver_err("upload"))
}
