//! Launches chain programmatically on sm_90+, one by one and in captured graphs: a reader that waits sees its writer's values, one that reads before waiting does not (skips, saying why, without a GPU).

use cudarc::driver::LaunchConfig;
use tensorfold_kernels::Faults;
use tensorfold_kernels::cuda::{self, CudaKernel, Gpu};

static PROBE: CudaKernel = CudaKernel {
    name: "chain_probe",
    source: r#"
extern "C" __global__ void chain_probe_slow(float* buf, int n, long long spin) {
    tf_grid_begin();
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] += 1.0f;
}
extern "C" __global__ void chain_probe_read(const float* buf, float* out, int n) {
    tf_grid_begin();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[i];
}
extern "C" __global__ void chain_probe_early(const float* buf, float* out, int n) {
    tf_grid_open();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[i];
    tf_grid_wait();
}
"#,
    entries: &["chain_probe_slow", "chain_probe_read", "chain_probe_early"],
    controls: &[],
    records: &[],
};

const N: usize = 1024;

/// What `reader` saw after each of `rounds` rounds of [slow writer, reader], launched one by one or replayed from a graph, and the graph's programmatic edges.
fn rounds(gpu: &Gpu, reader: &str, rounds: usize, graph: bool) -> (Vec<f32>, usize) {
    let slow = gpu.function(&PROBE, "chain_probe_slow", Faults::NONE).unwrap();
    let read = gpu.function(&PROBE, reader, Faults::NONE).unwrap();
    let buf = gpu.zeros::<f32>(N).unwrap();
    let out = gpu.zeros::<f32>(N).unwrap();
    let (n, spin) = (N as i32, 2_000_000i64);
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let pair = || {
        let mut a = gpu.launch_builder(&slow);
        a.arg(&buf).arg(&n).arg(&spin);
        // SAFETY: the arguments match chain_probe_slow's signature and `buf` holds N floats (the kernel writes it).
        unsafe { a.launch(one) }.unwrap();
        let mut b = gpu.launch_builder(&read);
        b.arg(&buf).arg(&out).arg(&n);
        // SAFETY: the arguments match the reader's signature and both buffers hold N floats.
        unsafe { b.launch(one) }.unwrap();
    };
    let captured = graph.then(|| gpu.capture(pair).unwrap().0);
    let mut seen = Vec::new();
    for _ in 0..rounds {
        match &captured {
            Some(g) => g.launch().unwrap(),
            None => pair(),
        }
        seen.push(gpu.stream.clone_dtoh(&out).unwrap()[N - 1]);
    }
    (seen, captured.map_or(0, |g| g.programmatic_edges()))
}

#[test]
fn waiting_readers_see_their_writer_and_early_readers_prove_the_overlap() {
    let gpu = match cuda::gpu() {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipping waiting_readers_see_their_writer_and_early_readers_prove_the_overlap: {why}");
            return;
        }
    };
    if !cuda::programmatic(gpu.arch) {
        eprintln!(
            "skipping: sm_{} or TENSORFOLD_PDL=0 launches without programmatic chains",
            gpu.arch
        );
        return;
    }
    for graph in [false, true] {
        let (seen, edges) = rounds(gpu, "chain_probe_read", 4, graph);
        assert_eq!(
            edges, graph as usize,
            "graph {graph}: the writer-to-reader edge is programmatic"
        );
        assert_eq!(
            seen,
            [1.0, 2.0, 3.0, 4.0],
            "graph {graph}: a waiting reader saw stale values"
        );
        let (early, _) = rounds(gpu, "chain_probe_early", 4, graph);
        assert!(
            early.iter().zip(1..).any(|(&v, k)| v != k as f32),
            "graph {graph}: a reader that never waited saw every write ({early:?}): the launches do not overlap"
        );
    }
}
