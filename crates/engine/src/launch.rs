//! Ranks as processes: rank 0 starts ranks 1..N as `tensorfold rank-worker` processes, joins them over a Unix-domain socket (and NCCL), and each follows rank 0's layers.

use std::os::unix::net::UnixListener;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::forward::collective::Collective;
use tensorfold_model::dsv4::forward::device::{Device, DeviceSpec};
use tensorfold_model::dsv4::forward::nccl::NcclCollective;
use tensorfold_model::dsv4::forward::parallel::{RankGroup, check_ranks, follow};
use tensorfold_model::dsv4::forward::socket::SocketCollective;
use tensorfold_model::dsv4::semantics::Semantics;

use crate::ranks::{RankOptions, Transport};
use crate::runner::Dsv4Runner;

/// The subcommand of the rank executable that runs one worker rank.
pub const WORKER_COMMAND: &str = "rank-worker";

/// What one worker rank is started with.
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    pub model: PathBuf,
    pub rank: usize,
    pub tp: usize,
    pub device: DeviceSpec,
    pub threads: usize,
    pub transport: Transport,
    /// Rank 0's socket.
    pub connect: PathBuf,
}

/// The worker processes and their socket's folder: on drop, waits for them to leave (rank 0 told them to), then ends any left.
struct Workers {
    children: Vec<(usize, Child)>,
    dir: PathBuf,
}

impl Drop for Workers {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for (_, child) in &mut self.children {
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One line to stderr in one write, so that the ranks' lines do not interleave.
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// The executable that runs worker ranks: `TENSORFOLD_RANK_EXE`, else this one.
fn rank_exe() -> Result<PathBuf, String> {
    match std::env::var_os("TENSORFOLD_RANK_EXE") {
        Some(p) => Ok(PathBuf::from(p)),
        None => std::env::current_exe().map_err(|e| format!("cannot find this executable to start ranks: {e}")),
    }
}

fn per_rank_threads(spec: DeviceSpec, threads: usize, tp: usize) -> usize {
    match spec {
        DeviceSpec::Cpu => (threads / tp).max(1),
        DeviceSpec::Cuda(_) => 1,
    }
}

/// A private folder for rank 0's socket.
fn socket_dir() -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("tensorfold-ranks-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Checks that `transport` can run ranks on `spec` (and `ordinals`) before any process starts.
fn check_transport(spec: DeviceSpec, transport: Transport, ordinals: &[usize]) -> Result<(), String> {
    match (spec, transport) {
        (DeviceSpec::Cpu, Transport::Nccl) => {
            Err("--ranks-transport nccl needs --device cuda; on the CPU use processes or threads".into())
        }
        (DeviceSpec::Cuda(_), Transport::Nccl) => tensorfold_kernels::cuda::multi_gpu(ordinals)
            .map_err(|why| format!("--ranks-transport nccl: {why}; or use --ranks-transport processes")),
        (DeviceSpec::Cuda(_), _) => {
            let count = tensorfold_kernels::cuda::gpu_count()?;
            match ordinals.iter().find(|&&o| o >= count) {
                Some(o) => Err(format!(
                    "ranks on GPUs {ordinals:?} need GPU {o}; the driver reports {count}"
                )),
                None => Ok(()),
            }
        }
        (DeviceSpec::Cpu, _) => Ok(()),
    }
}

/// Rank 0 of `opts.tp` process-ranks over `transport`: starts ranks 1..N, joins them, and keeps its own share of `model`.
pub(crate) fn leader(
    dir: &Path,
    mut model: Dsv4Model,
    spec: DeviceSpec,
    threads: usize,
    opts: &RankOptions,
    transport: Transport,
) -> Result<Dsv4Runner, String> {
    let tp = opts.tp;
    check_ranks(&model, tp)?;
    let specs: Vec<DeviceSpec> = (0..tp).map(|r| opts.device_of(spec, r)).collect::<Result<_, _>>()?;
    let ordinals: Vec<usize> = specs
        .iter()
        .filter_map(|s| match s {
            DeviceSpec::Cuda(o) => Some(*o),
            DeviceSpec::Cpu => None,
        })
        .collect();
    check_transport(spec, transport, &ordinals)?;
    let per_rank = per_rank_threads(spec, threads, tp);
    let device = match specs[0] {
        DeviceSpec::Cpu => Device::Cpu(CpuLaunch::serving(per_rank)),
        s => s.open(per_rank)?,
    };
    let exe = rank_exe()?;
    let sock_dir = socket_dir()?;
    let sock = sock_dir.join("ranks.sock");
    let listener = UnixListener::bind(&sock).map_err(|e| format!("cannot listen on {}: {e}", sock.display()))?;
    let mut workers = Workers {
        children: Vec::new(),
        dir: sock_dir,
    };
    for (rank, s) in specs.iter().enumerate().skip(1) {
        let child = Command::new(&exe)
            .arg(WORKER_COMMAND)
            .args(["--model".as_ref(), dir.as_os_str()])
            .args(["--rank", &rank.to_string(), "--tp", &tp.to_string()])
            .args(["--device", &s.to_string(), "--threads", &per_rank.to_string()])
            .args(["--transport", &transport.to_string()])
            .args(["--connect".as_ref(), sock.as_os_str()])
            .env("NCCL_NVLS_ENABLE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start rank {rank} ({}): {e}", exe.display()))?;
        say(&format!("rank {rank} of {tp}: pid {} on {s}", child.id()));
        workers.children.push((rank, child));
    }
    let children = &mut workers.children;
    let sockets = SocketCollective::accept(&listener, tp, || {
        for (rank, c) in children.iter_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!(
                    "rank {rank} (pid {}) exited while starting ({status}); its error is above",
                    c.id()
                ));
            }
        }
        Ok(())
    })?;
    let comm: Box<dyn Collective> = match transport {
        Transport::Nccl => {
            let gpu = device.cuda().ok_or("NCCL ranks run on GPUs")?.gpu;
            Box::new(NcclCollective::over(sockets, gpu)?)
        }
        _ => Box::new(sockets),
    };
    say(&format!(
        "{} on {} over {transport}",
        model.weights.keep_share(0, tp),
        specs[0]
    ));
    let group = RankGroup::leader(comm, Some(Box::new(workers)));
    Ok(Dsv4Runner {
        ranks: Some(group),
        ..Dsv4Runner::new(model, device)
    })
}

/// Runs worker rank `a.rank`: loads its share of the model, joins rank 0, and follows its layers until rank 0 closes the group.
pub fn worker(a: &WorkerArgs) -> Result<(), String> {
    let mut model = tensorfold_model::dsv4::load_model(&a.model, Semantics::official()).map_err(|e| e.to_string())?;
    check_ranks(&model, a.tp)?;
    let share = model.weights.keep_share(a.rank, a.tp);
    let device = match a.device {
        DeviceSpec::Cpu => Device::Cpu(CpuLaunch::serving(a.threads.max(1))),
        s => s.open(a.threads)?,
    };
    let sockets = SocketCollective::connect(&a.connect, a.rank, a.tp)?;
    let comm: Box<dyn Collective> = match a.transport {
        Transport::Nccl => {
            let gpu = device.cuda().ok_or("NCCL ranks run on GPUs")?.gpu;
            Box::new(NcclCollective::over(sockets, gpu)?)
        }
        _ => Box::new(sockets),
    };
    say(&format!("{share} on {} over {}", a.device, a.transport));
    catch_unwind(AssertUnwindSafe(|| follow(&model, &device, comm.as_ref()))).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a kernel panicked".into())
    })?;
    if let Some(c) = device.cuda() {
        say(&format!(
            "rank {} of {}: {:.2} MiB of weights were resident on {}",
            a.rank,
            a.tp,
            c.resident.bytes() as f64 / (1u64 << 20) as f64,
            a.device
        ));
    }
    Ok(())
}
