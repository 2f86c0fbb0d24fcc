//! A pass's activations where its device keeps them: host vectors on the CPU, buffers that stay on the GPU under CUDA.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use cudarc::driver::{CudaSlice, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use tensorfold_kernels::cuda::{Branch, In, Out};

use super::device::Device;

/// Values of one activation tensor, on the pass's device.
pub(crate) enum Act<T = f32> {
    Host(Vec<T>),
    Dev(CudaSlice<T>, usize),
    /// A captured graph's output buffer, used in place by the pass that replayed it and never freed here.
    Lent(Borrowed<T>, usize),
}

/// A device buffer used without owning it: dropping it frees nothing.
pub(crate) struct Borrowed<T>(Option<CudaSlice<T>>);

impl<T> Borrowed<T> {
    /// Safety: the buffer must stay allocated while this lives, and nothing else may free it through this handle.
    pub(crate) unsafe fn new(s: CudaSlice<T>) -> Borrowed<T> {
        Borrowed(Some(s))
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.leak();
        }
    }
}

impl<T> std::ops::Deref for Borrowed<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        self.0.as_ref().expect("a borrowed buffer until dropped")
    }
}

impl<T> std::ops::DerefMut for Borrowed<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        self.0.as_mut().expect("a borrowed buffer until dropped")
    }
}

/// Element types activations hold.
pub(crate) trait Elem: DeviceRepr + ValidAsZeroBits + Unpin + Copy + Default {}
impl Elem for f32 {}
impl Elem for i32 {}

/// GPU readbacks so far in this process: how many, and nanoseconds the host spent in them (waiting for the GPU included).
static READBACKS: (AtomicU64, AtomicU64) = (AtomicU64::new(0), AtomicU64::new(0));

/// The GPU readbacks of this process so far: (count, seconds spent in them).
pub fn readbacks() -> (u64, f64) {
    let (n, ns) = (READBACKS.0.load(Ordering::Relaxed), READBACKS.1.load(Ordering::Relaxed));
    (n, ns as f64 * 1e-9)
}

/// The value of a CUDA call, or a panic naming what failed (the runner turns it into the pass's error).
pub(super) fn cuda_ok<R>(what: &str, r: Result<R, impl std::fmt::Debug>) -> R {
    r.unwrap_or_else(|e| panic!("{what} on CUDA failed: {e:?}"))
}

impl<T: Elem> Act<T> {
    pub fn len(&self) -> usize {
        match self {
            Act::Host(v) => v.len(),
            Act::Dev(_, n) | Act::Lent(_, n) => *n,
        }
    }

    /// The device buffer and value count of a GPU activation.
    pub fn dev(&self) -> Option<(&CudaSlice<T>, usize)> {
        match self {
            Act::Host(_) => None,
            Act::Dev(s, n) => Some((s, *n)),
            Act::Lent(s, n) => Some((s, *n)),
        }
    }

    fn dev_mut(&mut self) -> Option<(&mut CudaSlice<T>, usize)> {
        match self {
            Act::Host(_) => None,
            Act::Dev(s, n) => Some((s, *n)),
            Act::Lent(s, n) => Some((s, *n)),
        }
    }

    /// A kernel input reading these values where they are.
    pub fn input(&self) -> In<'_, T> {
        match (self, self.dev()) {
            (_, Some((s, n))) => In::Dev(s.slice(..n)),
            (Act::Host(v), None) => In::Host(v),
            _ => unreachable!("a GPU activation has a device buffer"),
        }
    }

    /// A kernel output writing these values where they are.
    pub fn output(&mut self) -> Out<'_, T> {
        if let Act::Host(v) = self {
            return Out::Host(v);
        }
        let (s, n) = self.dev_mut().expect("a GPU activation has a device buffer");
        Out::Dev(s.slice_mut(..n))
    }

    /// The host values of a CPU pass.
    pub fn host(&self) -> &[T] {
        match self {
            Act::Host(v) => v,
            _ => panic!("a CPU kernel was handed a GPU buffer"),
        }
    }

    /// The host values of a CPU pass, to write.
    pub fn host_mut(&mut self) -> &mut [T] {
        match self {
            Act::Host(v) => v,
            _ => panic!("a CPU kernel was handed a GPU buffer"),
        }
    }

    /// The values on the host: moved out of a CPU pass, copied back from the GPU (waiting for it).
    pub fn into_vec(self, d: &Device) -> Vec<T> {
        match self {
            Act::Host(v) => v,
            dev => dev.to_vec(d),
        }
    }

    /// A host copy of the values (waits for the GPU).
    pub fn to_vec(&self, d: &Device) -> Vec<T> {
        match self {
            Act::Host(v) => v.clone(),
            dev => d.read_back(&[dev]).pop().expect("one read-back"),
        }
    }

    /// A copy on the same device.
    pub fn duplicate(&self, d: &Device) -> Act<T> {
        match self {
            Act::Host(v) => Act::Host(v.clone()),
            dev => {
                let (s, n) = dev.dev().expect("a GPU activation has a device buffer");
                let c = d.cuda().expect("a GPU buffer in a GPU pass");
                Act::Dev(cuda_ok("copying", c.gpu.work().clone_dtod(s)), n)
            }
        }
    }

    /// Copies rows `src_rows` (each `width` values) of `src` into rows `dst_rows` of `self`, on the device.
    pub fn copy_rows(&mut self, d: &Device, dst_rows: &[usize], src: &Act<T>, src_rows: &[usize], width: usize) {
        match (self, src) {
            (Act::Host(dst), Act::Host(s)) => {
                for (&o, &i) in dst_rows.iter().zip(src_rows) {
                    dst[o * width..(o + 1) * width].copy_from_slice(&s[i * width..(i + 1) * width]);
                }
            }
            (dst, s) if dst.dev().is_some() && s.dev().is_some() => {
                let ((dst, _), (s, _)) = (dst.dev_mut().expect("checked"), s.dev().expect("checked"));
                let c = d.cuda().expect("a GPU buffer in a GPU pass");
                for (o, i, n) in runs(dst_rows, src_rows) {
                    let from = s.slice(i * width..(i + n) * width);
                    let mut to = dst.slice_mut(o * width..(o + n) * width);
                    cuda_ok("copying rows", c.gpu.work().memcpy_dtod(&from, &mut to));
                }
            }
            _ => panic!("rows copied between a host and a GPU buffer"),
        }
    }
}

/// `n` device values that are written in full before they are read, not cleared first.
fn scratch<T: Elem>(c: &super::device::CudaDevice, n: usize) -> CudaSlice<T> {
    c.gpu
        .scratch(n)
        .unwrap_or_else(|e| panic!("allocating on CUDA failed: {e}"))
}

/// Row pairs merged into runs `(dst, src, rows)` where both sides continue one row apart.
fn runs(dst_rows: &[usize], src_rows: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    for (&o, &i) in dst_rows.iter().zip(src_rows) {
        match out.last_mut() {
            Some((lo, li, n)) if *lo + *n == o && *li + *n == i => *n += 1,
            _ => out.push((o, i, 1)),
        }
    }
    out
}

impl Device {
    /// `n` zeros on this device.
    pub(crate) fn zeros<T: Elem>(&self, n: usize) -> Act<T> {
        match self.cuda() {
            None => Act::Host(vec![T::default(); n]),
            Some(c) => Act::Dev(cuda_ok("allocating", c.gpu.work().alloc_zeros(n.max(1))), n),
        }
    }

    /// `n` values for a kernel that writes every one (the contract's gate 1 proves it): not cleared first on the GPU.
    pub(crate) fn alloc<T: Elem>(&self, n: usize) -> Act<T> {
        match self.cuda() {
            None => Act::Host(vec![T::default(); n]),
            Some(c) => Act::Dev(scratch(c, n), n),
        }
    }

    /// The host values of several activations: under CUDA read back together with one wait.
    pub(crate) fn read_all<T: Elem>(&self, acts: Vec<Act<T>>) -> Vec<Vec<T>> {
        match self.cuda() {
            None => acts.into_iter().map(|a| a.into_vec(self)).collect(),
            Some(_) => self.read_back(&acts.iter().collect::<Vec<_>>()),
        }
    }

    /// The host values of GPU activations, copied back through the GPU's page-locked buffer with one wait.
    fn read_back<T: Elem>(&self, acts: &[&Act<T>]) -> Vec<Vec<T>> {
        let c = self.cuda().expect("a GPU buffer in a GPU pass");
        let views: Vec<_> = acts
            .iter()
            .map(|a| match a.dev() {
                Some((s, n)) => s.slice(..n),
                None => panic!("a host buffer among a GPU pass's read-backs"),
            })
            .collect();
        let t = Instant::now();
        let out = cuda_ok("copying back", c.gpu.read_back(&views));
        READBACKS.0.fetch_add(1, Ordering::Relaxed);
        READBACKS.1.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// `n` copies of `v` on this device (filled on the stream under CUDA, no host copy).
    pub(crate) fn fill(&self, n: usize, v: f32) -> Act {
        match self.cuda() {
            None => Act::Host(vec![v; n]),
            Some(c) => {
                let mut s = scratch::<f32>(c, n.max(1));
                let stream = c.gpu.work();
                {
                    let (ptr, _sync) = s.device_ptr_mut(stream);
                    // SAFETY: `s` holds at least `n.max(1)` f32 values, written on the stream that owns them.
                    let r = unsafe {
                        cudarc::driver::sys::cuMemsetD32Async(ptr, v.to_bits(), n.max(1), stream.cu_stream())
                    };
                    cuda_ok("filling", r.result());
                }
                Act::Dev(s, n)
            }
        }
    }

    /// Runs `f` with its GPU work beside the pass's stream (`Gpu::beside`), overlapping later work until the branch joins or drops; a plain call on the CPU.
    pub(crate) fn beside<R>(&self, f: impl FnOnce() -> R) -> (Option<Branch<'static>>, R) {
        match self.cuda() {
            None => (None, f()),
            Some(c) => {
                let (branch, r) = cuda_ok("branching", c.gpu.beside(f));
                (Some(branch), r)
            }
        }
    }

    /// Host values placed on this device (uploaded once under CUDA).
    pub(crate) fn put<T: Elem>(&self, v: Vec<T>) -> Act<T> {
        match self.cuda() {
            None => Act::Host(v),
            Some(_) if v.is_empty() => self.zeros(0),
            Some(c) => {
                let n = v.len();
                Act::Dev(cuda_ok("uploading", c.gpu.work().clone_htod(&v)), n)
            }
        }
    }

    /// Host values placed on this device by an upload ahead of the stream under `key` (`Gpu::upload_ahead`), else by `put`; `Some(key)` when the loan must end with `ahead_done`.
    pub(crate) fn put_ahead(&self, key: u64, v: Vec<f32>) -> (Act, Option<u64>) {
        let Some(c) = self.cuda() else {
            return (Act::Host(v), None);
        };
        let n = v.len();
        // SAFETY: the alias is only held as borrowed below (never freed), and the caller ends the loan after its last reader is queued.
        let Ok(s) = (unsafe { c.gpu.upload_ahead(key, &v) }) else {
            return (self.put(v), None);
        };
        // SAFETY: the key's buffer lives as long as the GPU, and nothing frees it through this handle.
        (Act::Lent(unsafe { Borrowed::new(s) }, n), Some(key))
    }

    /// Ends an upload ahead's loan once the work reading it is queued.
    pub(crate) fn ahead_done(&self, key: u64) {
        if let Some(c) = self.cuda() {
            cuda_ok("ending an upload's loan", c.gpu.ahead_done(key));
        }
    }

    /// Host values placed on this device.
    pub(crate) fn put_slice<T: Elem>(&self, v: &[T]) -> Act<T> {
        self.put(v.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfold_kernels::cpu::CpuLaunch;

    #[test]
    fn rows_land_where_asked_and_the_rest_stays_zero() {
        let d = Device::Cpu(CpuLaunch::serving(1));
        let src = d.put(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]); // [3, 2]
        let mut dst = d.zeros::<f32>(8); // [4, 2]
        dst.copy_rows(&d, &[3, 0], &src, &[0, 2], 2);
        assert_eq!(dst.len(), 8);
        assert_eq!(dst.to_vec(&d), vec![5.0, 6.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0]);
        let copy = dst.duplicate(&d);
        assert_eq!(copy.into_vec(&d), dst.into_vec(&d));
        assert_eq!(d.zeros::<i32>(0).len(), 0);
    }

    #[test]
    fn row_pairs_merge_into_runs_only_where_both_sides_continue() {
        assert_eq!(runs(&[3, 4, 5, 9], &[0, 1, 2, 3]), vec![(3, 0, 3), (9, 3, 1)]);
        assert_eq!(runs(&[0, 1], &[1, 0]), vec![(0, 1, 1), (1, 0, 1)]);
        assert!(runs(&[], &[]).is_empty());
    }
}
