//! Kernel arguments that are either host slices (uploaded for one launch, the contract's way) or buffers already on the device (the forward pass's way).

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr, ValidAsZeroBits};

use super::device::{DeviceOut, Gpu, Guarded};

/// A kernel input: host values uploaded for the launch, or a device buffer read in place.
pub enum In<'a, T> {
    Host(&'a [T]),
    Dev(CudaView<'a, T>),
}

impl<'a, T> In<'a, T> {
    pub fn len(&self) -> usize {
        match self {
            In::Host(h) => h.len(),
            In::Dev(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host values, when the input is on the host (checks that read values run only then).
    pub fn host(&self) -> Option<&'a [T]> {
        match self {
            In::Host(h) => Some(h),
            In::Dev(_) => None,
        }
    }
}

impl<'a, T> From<&'a [T]> for In<'a, T> {
    fn from(h: &'a [T]) -> Self {
        In::Host(h)
    }
}

impl<'a, T> From<&'a Vec<T>> for In<'a, T> {
    fn from(h: &'a Vec<T>) -> Self {
        In::Host(h)
    }
}

impl<'a, T> From<&'a CudaSlice<T>> for In<'a, T> {
    fn from(d: &'a CudaSlice<T>) -> Self {
        In::Dev(d.as_view())
    }
}

impl<'a, T> From<CudaView<'a, T>> for In<'a, T> {
    fn from(d: CudaView<'a, T>) -> Self {
        In::Dev(d)
    }
}

/// A kernel output: a host slice (a guarded device copy written back after the launch) or a device buffer written in place.
pub enum Out<'a, T> {
    Host(&'a mut [T]),
    Dev(CudaViewMut<'a, T>),
}

impl<T> Out<'_, T> {
    pub fn len(&self) -> usize {
        match self {
            Out::Host(h) => h.len(),
            Out::Dev(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, T> From<&'a mut [T]> for Out<'a, T> {
    fn from(h: &'a mut [T]) -> Self {
        Out::Host(h)
    }
}

impl<'a, T> From<&'a mut Vec<T>> for Out<'a, T> {
    fn from(h: &'a mut Vec<T>) -> Self {
        Out::Host(h)
    }
}

impl<'a, T> From<&'a mut CudaSlice<T>> for Out<'a, T> {
    fn from(d: &'a mut CudaSlice<T>) -> Self {
        Out::Dev(d.as_view_mut())
    }
}

impl<'a, T> From<CudaViewMut<'a, T>> for Out<'a, T> {
    fn from(d: CudaViewMut<'a, T>) -> Self {
        Out::Dev(d)
    }
}

/// Activation rows act_quant'ed already (`rms_norm_quant`, `fp8_gemm_quant`): f16 e4m3 grid values, row stride K rounded up to 8, and a scale per 128 values of a row.
pub struct Quantised<'a> {
    pub q: In<'a, u16>,
    pub scales: In<'a, f32>,
    pub rows: usize,
}

impl Quantised<'_> {
    /// Its rows of width `k`, or why its buffers are too short for them.
    pub fn rows(&self, k: usize) -> Result<usize, String> {
        if k == 0 || self.scales.len() < self.rows * k.div_ceil(128) || self.q.len() < self.rows * k.next_multiple_of(8)
        {
            return Err(format!(
                "{} quantised values and {} scales are too few for {} rows of {k}",
                self.q.len(),
                self.scales.len(),
                self.rows
            ));
        }
        Ok(self.rows)
    }
}

/// An input ready for a launch: uploaded for it, or the caller's device buffer.
pub enum Staged<'a, T> {
    Owned(CudaSlice<T>),
    View(CudaView<'a, T>),
}

impl<T> Staged<'_, T> {
    /// The device values, for a kernel argument.
    pub fn view(&self) -> CudaView<'_, T> {
        match self {
            Staged::Owned(s) => s.as_view(),
            Staged::View(v) => v.slice(..),
        }
    }
}

/// An output ready for a launch: a guarded copy of a host slice, or the caller's device buffer.
pub enum StagedOut<'a, T: Guarded> {
    Guarded(DeviceOut<T>, &'a mut [T]),
    View(CudaViewMut<'a, T>),
}

impl<T: Guarded> StagedOut<'_, T> {
    /// The output elements, for a kernel argument.
    pub fn view(&mut self) -> CudaViewMut<'_, T> {
        match self {
            StagedOut::Guarded(d, _) => d.view(),
            StagedOut::View(v) => v.slice_mut(..),
        }
    }

    /// Copies a host output back (checking its guard bands); a device output stays where it is.
    pub fn finish(self, gpu: &Gpu) -> Result<(), String> {
        match self {
            StagedOut::Guarded(d, host) => d.finish(gpu, host),
            StagedOut::View(_) => Ok(()),
        }
    }
}

impl Gpu {
    /// Uploads a host input, or passes a device one through.
    pub fn stage<'a, T: DeviceRepr + ValidAsZeroBits + Unpin>(&self, x: In<'a, T>) -> Result<Staged<'a, T>, String> {
        match x {
            In::Host(h) => Ok(Staged::Owned(self.upload(h)?)),
            In::Dev(v) => Ok(Staged::View(v)),
        }
    }

    /// A guarded device copy of a host output, or a device output passed through.
    pub fn stage_out<'a, T: Guarded>(&self, y: Out<'a, T>) -> Result<StagedOut<'a, T>, String> {
        match y {
            Out::Host(h) => Ok(StagedOut::Guarded(self.output(h)?, h)),
            Out::Dev(v) => Ok(StagedOut::View(v)),
        }
    }
}
