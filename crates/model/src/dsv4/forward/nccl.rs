//! Ranks as processes, one GPU each, exchanging over NCCL: the socket collective starts the communicator and stays open beside it.

use std::sync::Mutex;

use tensorfold_kernels::cuda::Gpu;
use tensorfold_kernels::cuda::nccl::{self, Nccl, NcclId};

use super::collective::Collective;
use super::socket::SocketCollective;

/// One rank's end of an NCCL collective.
pub struct NcclCollective {
    nccl: Nccl,
    /// The sockets the communicator was started over; kept so that the ranks stay connected.
    control: SocketCollective,
    /// Why an NCCL call failed, once one has.
    failed: Mutex<Option<String>>,
}

fn to_floats(id: &NcclId) -> Vec<f32> {
    id.chunks_exact(4)
        .map(|c| f32::from_bits(u32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8])))
        .collect()
}

fn to_id(v: &[f32]) -> Option<NcclId> {
    let bytes: Vec<std::ffi::c_char> = v
        .iter()
        .flat_map(|f| f.to_bits().to_le_bytes())
        .map(|b| b as std::ffi::c_char)
        .collect();
    bytes.try_into().ok()
}

/// A length as one f32 bit pattern (exact for any length below 2^32).
fn word(n: usize) -> f32 {
    f32::from_bits(n as u32)
}

impl NcclCollective {
    /// Joins every rank of `control` into one NCCL communicator on `gpu`; rank 0 makes the id and sends it over `control`.
    pub fn over(control: SocketCollective, gpu: &'static Gpu) -> Result<NcclCollective, String> {
        let (rank, ranks) = (control.rank(), control.ranks());
        let made = if rank == 0 { Some(nccl::unique_id()) } else { None };
        let mut buf = match &made {
            Some(Ok(id)) => to_floats(id),
            _ => Vec::new(),
        };
        control.broadcast(&mut buf, 0);
        if let Some(Err(why)) = made {
            return Err(why);
        }
        let id = to_id(&buf).ok_or("rank 0 could not start NCCL; its error says why")?;
        let nccl = Nccl::join(gpu, rank, ranks, id)?;
        Ok(NcclCollective {
            nccl,
            control,
            failed: Mutex::new(None),
        })
    }

    /// The value of an NCCL call, or a panic that breaks the collective for good.
    fn ok<T>(&self, r: Result<T, String>) -> T {
        if let Some(why) = self.broken() {
            panic!("{why}");
        }
        r.unwrap_or_else(|e| {
            let why = format!("{e}; the rank group is down, restart to serve again");
            *self.failed.lock().expect("collective state") = Some(why.clone());
            panic!("{why}")
        })
    }
}

impl Collective for NcclCollective {
    fn rank(&self) -> usize {
        self.control.rank()
    }

    fn ranks(&self) -> usize {
        self.control.ranks()
    }

    fn all_gather(&self, mine: &[f32]) -> Vec<Vec<f32>> {
        let lens: Vec<usize> = self
            .ok(self
                .nccl
                .all_gather(&[word(mine.len())], &|| self.control.peers_alive()))
            .iter()
            .map(|v| v.to_bits() as usize)
            .collect();
        let width = lens.iter().copied().max().unwrap_or(0);
        let mut padded = mine.to_vec();
        padded.resize(width, 0.0);
        let all = self.ok(self.nccl.all_gather(&padded, &|| self.control.peers_alive()));
        lens.iter()
            .enumerate()
            .map(|(r, &n)| all[r * width..r * width + n].to_vec())
            .collect()
    }

    fn broadcast(&self, buf: &mut Vec<f32>, root: usize) {
        let mut len = [word(buf.len())];
        self.ok(self.nccl.broadcast(&mut len, root, &|| self.control.peers_alive()));
        buf.resize(len[0].to_bits() as usize, 0.0);
        self.ok(self.nccl.broadcast(buf, root, &|| self.control.peers_alive()));
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) {
        self.ok(self.nccl.all_reduce_sum(buf, &|| self.control.peers_alive()));
    }

    fn barrier(&self) {
        self.ok(self.nccl.all_reduce_sum(&mut [0.0], &|| self.control.peers_alive()));
    }

    fn broken(&self) -> Option<String> {
        let failed = self.failed.lock().expect("collective state").clone();
        failed.or_else(|| self.control.broken())
    }
}
