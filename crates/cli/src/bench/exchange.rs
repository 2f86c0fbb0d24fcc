//! `tensorfold bench exchange`: per layer, the gathers `--tp` does (every head's attention output, every routed slot's expert output) against the all-reduces of `[rows, D]` a reduction-splitting split would do, on thread-, process- or NCCL-ranks.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::anyhow;
use clap::Args;
use tensorfold_engine::ranks::Transport;
use tensorfold_model::dsv4::forward::collective::{Collective, ThreadCollective};
use tensorfold_model::dsv4::forward::nccl::NcclCollective;
use tensorfold_model::dsv4::forward::socket::SocketCollective;
use tensorfold_model::synth::Preset;

#[derive(Args, Clone)]
pub struct ExchangeArgs {
    /// Model shapes: a synth preset (flash-layers, small, tiny).
    #[arg(long, default_value = "flash-layers")]
    preset: String,
    /// Ranks.
    #[arg(long, default_value_t = 2)]
    tp: usize,
    /// Rows per pass (1 is batch-1 decode).
    #[arg(long, default_value_t = 1)]
    rows: usize,
    /// Layers' worth of exchanges timed per measurement.
    #[arg(long, default_value_t = 200)]
    layers: usize,
    /// How the ranks exchange: threads of this process, processes over Unix sockets, or nccl (one process per GPU; its all-reduce is NCCL's own).
    #[arg(long, default_value = "threads")]
    transport: Transport,
    /// Each rank's GPU with nccl (default: rank r on GPU r).
    #[arg(long, value_delimiter = ',')]
    rank_devices: Vec<usize>,
    /// Set by rank 0 for the ranks it starts.
    #[arg(long, hide = true)]
    rank: Option<usize>,
    #[arg(long, hide = true)]
    connect: Option<PathBuf>,
}

/// Floats per rank of one layer's two gathers, and of its all-reduces.
#[derive(Clone, Copy)]
struct Sizes {
    attn: usize,
    moe: usize,
    reduce: usize,
}

/// Seconds for `layers` rounds of `f`, from a barrier to a barrier (so the slowest rank's).
fn time(c: &dyn Collective, layers: usize, f: impl Fn(&dyn Collective)) -> f64 {
    c.barrier();
    let t = Instant::now();
    for _ in 0..layers {
        f(c);
    }
    c.barrier();
    t.elapsed().as_secs_f64()
}

/// (gather, all-reduce) seconds on this rank.
fn measure(c: &dyn Collective, layers: usize, s: Sizes) -> (f64, f64) {
    let gather = time(c, layers, |c| {
        std::hint::black_box(c.gather(&vec![1.0; s.attn], 0));
        std::hint::black_box(c.gather(&vec![1.0; s.moe], 0));
    });
    let reduce = time(c, layers, |c| {
        let mut buf = vec![1.0f32; s.reduce];
        c.all_reduce_sum(&mut buf);
        c.all_reduce_sum(&mut buf);
        std::hint::black_box(buf);
    });
    (gather, reduce)
}

fn on_threads(tp: usize, layers: usize, s: Sizes) -> (f64, f64) {
    let handles: Vec<_> = ThreadCollective::group(tp)
        .into_iter()
        .map(|c| std::thread::spawn(move || measure(&c, layers, s)))
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("rank thread"))
        .fold((0.0, 0.0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
}

/// The GPU of rank `rank` for nccl.
fn gpu_of(a: &ExchangeArgs, rank: usize) -> anyhow::Result<&'static tensorfold_kernels::cuda::Gpu> {
    let ordinal = a.rank_devices.get(rank).copied().unwrap_or(rank);
    tensorfold_kernels::cuda::select(ordinal).map_err(|e| anyhow!("rank {rank}: {e}"))
}

/// This rank's collective over `sockets`, NCCL beside them when asked for.
fn joined(a: &ExchangeArgs, rank: usize, sockets: SocketCollective) -> anyhow::Result<Box<dyn Collective>> {
    Ok(match a.transport {
        Transport::Nccl => Box::new(NcclCollective::over(sockets, gpu_of(a, rank)?).map_err(|e| anyhow!(e))?),
        _ => Box::new(sockets),
    })
}

/// Rank 0 of process-ranks: starts ranks 1..N as this command, joins them and measures.
fn on_processes(a: &ExchangeArgs, s: Sizes) -> anyhow::Result<(f64, f64)> {
    if a.transport == Transport::Nccl {
        let ordinals: Vec<usize> = (0..a.tp).map(|r| a.rank_devices.get(r).copied().unwrap_or(r)).collect();
        tensorfold_kernels::cuda::multi_gpu(&ordinals).map_err(|e| anyhow!("--transport nccl: {e}"))?;
    }
    let dir = std::env::temp_dir().join(format!("tensorfold-exchange-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sock = dir.join("exchange.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)?;
    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = Vec::new();
    for rank in 1..a.tp {
        let devices: Vec<String> = a.rank_devices.iter().map(|d| d.to_string()).collect();
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", "exchange", "--preset", &a.preset, "--tp", &a.tp.to_string()])
            .args(["--rows", &a.rows.to_string(), "--layers", &a.layers.to_string()])
            .args(["--transport", &a.transport.to_string(), "--rank", &rank.to_string()])
            .args(["--connect".as_ref(), sock.as_os_str()])
            .env("NCCL_NVLS_ENABLE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if !devices.is_empty() {
            cmd.args(["--rank-devices", &devices.join(",")]);
        }
        children.push(cmd.spawn()?);
    }
    let sockets = SocketCollective::accept(&listener, a.tp, || {
        match children.iter_mut().find_map(|c| c.try_wait().ok().flatten()) {
            Some(status) => Err(format!("a rank exited while starting ({status})")),
            None => Ok(()),
        }
    })
    .map_err(|e| anyhow!(e))?;
    let comm = joined(a, 0, sockets)?;
    let out = measure(comm.as_ref(), a.layers, s);
    drop(comm);
    for mut c in children {
        c.wait()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

pub fn run(a: ExchangeArgs) -> anyhow::Result<()> {
    let c = Preset::parse(&a.preset, Some(1)).map_err(|e| anyhow!(e))?.config();
    let tp = a.tp.max(1);
    if c.num_attention_heads % tp != 0 || c.n_routed_experts % tp != 0 {
        return Err(anyhow!(
            "--tp {tp} does not divide the {} heads and {} experts",
            c.num_attention_heads,
            c.n_routed_experts
        ));
    }
    let rows = a.rows;
    let s = Sizes {
        attn: rows * c.num_attention_heads * c.head_dim / tp,
        moe: rows * c.num_experts_per_tok * c.hidden_size / tp,
        reduce: rows * c.hidden_size,
    };
    if let (Some(rank), Some(path)) = (a.rank, &a.connect) {
        let sockets = SocketCollective::connect(path, rank, tp).map_err(|e| anyhow!(e))?;
        measure(joined(&a, rank, sockets)?.as_ref(), a.layers, s);
        return Ok(());
    }
    let (gather, reduce) = match a.transport {
        Transport::Threads | Transport::Auto => on_threads(tp, a.layers, s),
        Transport::Processes | Transport::Nccl => on_processes(&a, s)?,
    };
    let per = |secs: f64| secs / a.layers as f64 * 1e6;
    println!(
        "preset {} tp {tp} rows {rows} over {}: gather {:.1} us/layer ({} + {} floats per rank), all-reduce {:.1} us/layer (2 x {} floats), ratio {:.2}",
        a.preset,
        a.transport,
        per(gather),
        s.attn,
        s.moe,
        per(reduce),
        s.reduce,
        gather / reduce
    );
    Ok(())
}
