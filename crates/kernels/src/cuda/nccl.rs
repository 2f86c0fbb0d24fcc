//! NCCL through cudarc's bindings: one communicator per process over host f32 buffers, with NVLink multicast kept off.

use std::sync::Mutex;

use cudarc::nccl::safe::{Comm, Id, ReduceOp};

use super::device::Gpu;
use super::libs;

/// The bytes of an NCCL unique id, as rank 0 hands them to the other ranks.
pub type NcclId = [std::ffi::c_char; 128];

/// A communicator whose calls are serialised, so that any thread may use it; `None` once aborted.
pub struct Nccl {
    comm: Mutex<Option<Comm>>,
    gpu: &'static Gpu,
}

/// Whether every peer is still there; an `Err` says which is gone.
pub type Alive<'a> = &'a dyn Fn() -> Result<(), String>;

// SAFETY: NCCL allows a communicator to be used from any thread when calls on it do not overlap; the mutex serialises them.
unsafe impl Send for Nccl {}
// SAFETY: as above: every use goes through the mutex.
unsafe impl Sync for Nccl {}

fn nccl_err(what: &str) -> impl Fn(cudarc::nccl::result::NcclError) -> String + '_ {
    move |e| format!("NCCL {what}: {:?}", e.0)
}

/// Refuses to go on unless NVLink multicast is off in this process's environment (it can take a shared host's GPUs out of service).
fn multicast_off() -> Result<(), String> {
    match std::env::var("NCCL_NVLS_ENABLE") {
        Ok(v) if v == "0" => Ok(()),
        _ => Err("NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off); set it before the process starts".into()),
    }
}

/// A fresh unique id for a new communicator (rank 0 makes it), or why NCCL cannot be used.
pub fn unique_id() -> Result<NcclId, String> {
    libs::nccl()?;
    multicast_off()?;
    Ok(*Id::new().map_err(nccl_err("unique id"))?.internal())
}

impl Nccl {
    /// Rank `rank` of `ranks` on `gpu`, joining the communicator of `id`; every rank calls it at once.
    pub fn join(gpu: &'static Gpu, rank: usize, ranks: usize, id: NcclId) -> Result<Nccl, String> {
        libs::nccl()?;
        multicast_off()?;
        let comm = Comm::from_rank(gpu.stream.clone(), rank, ranks, Id::uninit(id)).map_err(|e| {
            let hint = if e.0 == cudarc::nccl::sys::ncclResult_t::ncclInvalidUsage {
                " (NCCL needs a different GPU for each rank; --ranks-transport processes can share one)"
            } else {
                ""
            };
            format!("{}{hint}", nccl_err("joining")(e))
        })?;
        Ok(Nccl {
            comm: Mutex::new(Some(comm)),
            gpu,
        })
    }

    /// Runs `f` on the communicator, then waits for the stream while `alive` holds; a peer that is gone aborts the communicator.
    fn call<T>(&self, alive: Alive<'_>, f: impl FnOnce(&Comm) -> Result<T, String>) -> Result<T, String> {
        let mut guard = self.comm.lock().map_err(|_| "NCCL communicator poisoned".to_string())?;
        let comm = guard.as_ref().ok_or("the NCCL communicator was aborted")?;
        let out = f(comm)?;
        let done = self
            .gpu
            .stream
            .record_event(None)
            .map_err(|e| format!("CUDA event: {e:?}"))?;
        let mut polls = 0u32;
        while !done
            .try_is_complete()
            .map_err(|e| format!("NCCL on the stream: {e:?}"))?
        {
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(256)
                && let Err(why) = alive()
            {
                // Dropping a communicator aborts it, which ends the collective the dead peer left waiting.
                guard.take();
                return Err(why);
            }
            std::thread::yield_now();
        }
        Ok(out)
    }

    fn down(&self, dev: &cudarc::driver::CudaSlice<f32>, out: &mut [f32]) -> Result<(), String> {
        self.gpu
            .stream
            .memcpy_dtoh(dev, out)
            .map_err(|e| format!("CUDA download: {e:?}"))?;
        self.gpu.sync()
    }

    /// Every rank's `mine` (all of one length), concatenated in rank order.
    pub fn all_gather(&self, mine: &[f32], alive: Alive<'_>) -> Result<Vec<f32>, String> {
        let send = self.gpu.upload(mine)?;
        let recv = self.call(alive, |comm| {
            let n = comm.world_size();
            let mut recv = self
                .gpu
                .stream
                .alloc_zeros::<f32>((mine.len() * n).max(1))
                .map_err(|e| format!("CUDA alloc: {e:?}"))?;
            if !mine.is_empty() {
                comm.all_gather(&send, &mut recv).map_err(nccl_err("all-gather"))?;
            }
            Ok((recv, mine.len() * n))
        })?;
        let mut out = vec![0f32; recv.1];
        if !out.is_empty() {
            self.down(&recv.0, &mut out)?;
        }
        Ok(out)
    }

    /// Replaces `buf` with rank `root`'s (all of one length).
    pub fn broadcast(&self, buf: &mut [f32], root: usize, alive: Alive<'_>) -> Result<(), String> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut dev = self.gpu.upload(buf)?;
        self.call(alive, |comm| {
            comm.broadcast_in_place(&mut dev, root as i32)
                .map(|_| ())
                .map_err(nccl_err("broadcast"))
        })?;
        self.down(&dev, buf)
    }

    /// NCCL's own sum over the ranks (its order, so its bits, depend on the rank count and topology).
    pub fn all_reduce_sum(&self, buf: &mut [f32], alive: Alive<'_>) -> Result<(), String> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut dev = self.gpu.upload(buf)?;
        self.call(alive, |comm| {
            comm.all_reduce_in_place(&mut dev, &ReduceOp::Sum)
                .map(|_| ())
                .map_err(nccl_err("all-reduce"))
        })?;
        self.down(&dev, buf)
    }
}
