//! Work queued beside the process stream overlaps what the process stream queues after it, and the join orders later work after it, one by one and in captured graphs (skips, saying why, without a GPU).

use cudarc::driver::{CudaSlice, LaunchConfig};
use tensorfold_kernels::Faults;
use tensorfold_kernels::cuda::{self, CudaKernel, Gpu};

static PROBE: CudaKernel = CudaKernel {
    name: "beside_probe",
    source: r#"
extern "C" __global__ void beside_probe_set(volatile int* flag, int v) {
    tf_grid_begin();
    *flag = v;
    __threadfence_system();
}
extern "C" __global__ void beside_probe_wait(volatile int* flag, float* seen, long long spin) {
    tf_grid_begin();
    long long t0 = clock64();
    float s = 0.0f;
    while (clock64() - t0 < spin) {
        if (*flag == 1) {
            s = 1.0f;
            break;
        }
    }
    long long t1 = clock64();
    while (clock64() - t1 < spin / 8) {}
    seen[0] += s;
    seen[1] += 1.0f;
}
"#,
    entries: &["beside_probe_set", "beside_probe_wait"],
    controls: &[],
    records: &[],
};

const ONE: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (1, 1, 1),
    shared_mem_bytes: 0,
};

/// A round: the flag cleared, a waiter beside the process stream, the flag raised on the process stream after it, then the join (or the same work on one stream when `branch` is off).
fn round(gpu: &Gpu, flag: &CudaSlice<i32>, seen: &CudaSlice<f32>, branch: bool) {
    let set = gpu.function(&PROBE, "beside_probe_set", Faults::NONE).unwrap();
    let wait = gpu.function(&PROBE, "beside_probe_wait", Faults::NONE).unwrap();
    let raise = |v: i32| {
        let mut b = gpu.launch_builder(&set);
        b.arg(flag).arg(&v);
        // SAFETY: the arguments match beside_probe_set's signature and `flag` holds one int.
        unsafe { b.launch(ONE) }.unwrap();
    };
    let waiter = || {
        let spin = 200_000_000i64;
        let mut b = gpu.launch_builder(&wait);
        b.arg(flag).arg(seen).arg(&spin);
        // SAFETY: the arguments match beside_probe_wait's signature; `flag` holds one int and `seen` two floats.
        unsafe { b.launch(ONE) }.unwrap();
    };
    raise(0);
    let branch = branch.then(|| gpu.beside(waiter).unwrap().0);
    if branch.is_none() {
        waiter();
    }
    raise(1);
    if let Some(b) = branch {
        b.join().unwrap();
    }
}

/// `seen` after `rounds` rounds, each run one by one or replayed from one captured graph.
fn seen(gpu: &Gpu, rounds: usize, branch: bool, graph: bool) -> Vec<f32> {
    let flag = gpu.zeros::<i32>(1).unwrap();
    let seen = gpu.zeros::<f32>(2).unwrap();
    let captured = graph.then(|| gpu.capture(|| round(gpu, &flag, &seen, branch)).unwrap().0);
    for _ in 0..rounds {
        match &captured {
            Some(g) => g.launch().unwrap(),
            None => round(gpu, &flag, &seen, branch),
        }
    }
    // Read on the process stream: after the joins, the waiter's last write is visible.
    gpu.stream.clone_dtoh(&seen).unwrap()
}

#[test]
fn a_branch_overlaps_the_streams_later_work_and_its_join_orders_what_follows() {
    let gpu = match cuda::gpu() {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipping a_branch_overlaps_the_streams_later_work_and_its_join_orders_what_follows: {why}");
            return;
        }
    };
    let _turn = cuda::turn();
    for graph in [false, true] {
        assert_eq!(
            seen(gpu, 3, true, graph),
            [3.0, 3.0],
            "graph {graph}: a waiter beside the stream missed the flag raised after it, or its work was not joined"
        );
        assert_eq!(
            seen(gpu, 1, false, graph),
            [0.0, 1.0],
            "graph {graph}: on one stream the waiter must give up before the flag is raised"
        );
    }
    let (outer, ()) = gpu
        .beside(|| assert!(gpu.beside(|| ()).is_err(), "branches nest"))
        .unwrap();
    outer.join().unwrap();
    assert!(
        std::ptr::eq(gpu.work(), &gpu.stream),
        "work goes back to the process stream"
    );
}

#[test]
fn a_resident_copy_first_asked_for_beside_the_stream_is_ready_for_the_process_stream() {
    let gpu = match cuda::gpu() {
        Ok(g) => g,
        Err(why) => {
            eprintln!(
                "skipping a_resident_copy_first_asked_for_beside_the_stream_is_ready_for_the_process_stream: {why}"
            );
            return;
        }
    };
    let _turn = cuda::turn();
    let wait = gpu.function(&PROBE, "beside_probe_wait", Faults::NONE).unwrap();
    let (flag, seen) = (gpu.zeros::<i32>(1).unwrap(), gpu.zeros::<f32>(2).unwrap());
    gpu.sync().unwrap();
    let resident = cuda::Resident::default();
    let host: Vec<f32> = (0..4096).map(|i| i as f32 + 0.5).collect();
    // The side stream is busy for a while (no flag is raised) when the copy is first asked for there.
    let (branch, copy) = gpu
        .beside(|| {
            let spin = 200_000_000i64;
            let mut b = gpu.launch_builder(&wait);
            b.arg(&flag).arg(&seen).arg(&spin);
            // SAFETY: the arguments match beside_probe_wait's signature; `flag` holds one int and `seen` two floats.
            unsafe { b.launch(ONE) }.unwrap();
            resident.get(gpu, &host).unwrap()
        })
        .unwrap();
    let back = gpu.stream.clone_dtoh(&*copy).unwrap();
    branch.join().unwrap();
    assert!(back == host, "the process stream read the copy before it was made");
}
