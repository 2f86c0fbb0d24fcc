//! Timelines: labelled marks the host records beside CUDA events on the stream, to show where the GPU ran and where it waited for the host.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use cudarc::driver::CudaEvent;
use cudarc::driver::sys::CUevent_flags;

use super::device::Gpu;

/// Whether marks are recorded, and whether every kernel launch records one too.
static ON: (AtomicBool, AtomicBool) = (AtomicBool::new(false), AtomicBool::new(false));

/// The marks recorded so far, and spare events to record the next ones with.
#[derive(Default)]
pub(crate) struct Marks {
    list: Mutex<Vec<(String, Instant, CudaEvent)>>,
    spare: Mutex<Vec<CudaEvent>>,
}

/// One mark: its label, microseconds after the first mark on the host (queued) and on the GPU (reached).
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub label: String,
    pub host_us: f64,
    pub gpu_us: f64,
}

/// Starts or stops recording marks (`Gpu::take_marks` collects them); `kernels` adds one after each kernel launch, named by its entry.
pub fn record_marks(on: bool, kernels: bool) {
    ON.0.store(on, Ordering::Relaxed);
    ON.1.store(on && kernels, Ordering::Relaxed);
}

/// Records a mark after a kernel launch of `entry` while kernel marks are on.
pub(crate) fn kernel_mark(entry: &str) {
    if ON.1.load(Ordering::Relaxed)
        && let Ok(gpu) = super::gpu()
    {
        gpu.mark(|| entry.to_string());
    }
}

impl Gpu {
    /// Records a mark named by `label` while marks are on, outside graph captures; nothing otherwise.
    pub fn mark(&self, label: impl FnOnce() -> String) {
        if !ON.0.load(Ordering::Relaxed) || self.capturing() {
            return;
        }
        let spare = self.marks.spare.lock().expect("marks poisoned").pop();
        let event = match spare {
            Some(e) => e.record(&self.stream).map(|()| e),
            None => self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)),
        };
        let Ok(event) = event else { return };
        let mark = (label(), Instant::now(), event);
        self.marks.list.lock().expect("marks poisoned").push(mark);
    }

    /// The marks recorded since the last call (waiting for the GPU), times taken from the first of them.
    pub fn take_marks(&self) -> Result<Vec<Mark>, String> {
        let marks = std::mem::take(&mut *self.marks.list.lock().expect("marks poisoned"));
        let Some((_, host0, event0)) = marks.first() else {
            return Ok(Vec::new());
        };
        self.stream
            .synchronize()
            .map_err(|e| format!("CUDA waiting for marks: {e:?}"))?;
        let mut out = Vec::with_capacity(marks.len());
        for (label, host, event) in &marks {
            let ms = event0
                .elapsed_ms(event)
                .map_err(|e| format!("CUDA timing a mark: {e:?}"))?;
            out.push(Mark {
                label: label.clone(),
                host_us: host.duration_since(*host0).as_secs_f64() * 1e6,
                gpu_us: f64::from(ms) * 1e3,
            });
        }
        let events = marks.into_iter().map(|(_, _, e)| e);
        self.marks.spare.lock().expect("marks poisoned").extend(events);
        Ok(out)
    }
}
