//! Read-backs through the page-locked buffer wait for the work queued before them, and timeline marks time it (skips, saying why, without a GPU).

use cudarc::driver::LaunchConfig;
use tensorfold_kernels::Faults;
use tensorfold_kernels::cuda::{self, CudaKernel};

static PROBE: CudaKernel = CudaKernel {
    name: "readback_probe",
    source: r#"
extern "C" __global__ void readback_probe_slow(float* buf, int n, float add, long long spin) {
    tf_grid_begin();
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = (float)i + add;
}
"#,
    entries: &["readback_probe_slow"],
    controls: &[],
    records: &[],
};

#[test]
fn read_backs_wait_for_queued_writes_and_marks_time_them() {
    let gpu = match cuda::gpu() {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipping read_backs_wait_for_queued_writes_and_marks_time_them: {why}");
            return;
        }
    };
    let slow = gpu.function(&PROBE, "readback_probe_slow", Faults::NONE).unwrap();
    let (n, spin) = (5000usize, 20_000_000i64);
    let (a, b) = (gpu.zeros::<f32>(n).unwrap(), gpu.zeros::<f32>(n).unwrap());
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    cuda::record_marks(true, true);
    gpu.mark(|| "before".into());
    for (buf, add) in [(&a, 0.5f32), (&b, 7.0)] {
        let mut l = gpu.launch_builder(&slow);
        let nn = n as i32;
        l.arg(buf).arg(&nn).arg(&add).arg(&spin);
        // SAFETY: the arguments match readback_probe_slow's signature and the buffer holds n floats.
        cuda::launched("readback_probe_slow", unsafe { l.launch(one) }).unwrap();
    }
    // Larger than any landing buffer so far, then smaller: the buffer grows and is reused.
    let got = gpu.read_back(&[a.slice(..), b.slice(..0), b.slice(10..20)]).unwrap();
    gpu.mark(|| "after".into());
    cuda::record_marks(false, false);
    gpu.mark(|| "unrecorded".into());
    assert_eq!(got[0], (0..n).map(|i| i as f32 + 0.5).collect::<Vec<_>>());
    assert!(got[1].is_empty());
    assert_eq!(got[2], (10..20).map(|i| i as f32 + 7.0).collect::<Vec<_>>());
    let again = gpu.read_back(&[b.slice(1..3)]).unwrap();
    assert_eq!(again, vec![vec![8.0, 9.0]]);
    let marks = gpu.take_marks().unwrap();
    let labels: Vec<&str> = marks.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "before",
            "readback_probe_slow",
            "readback_probe_slow",
            "3 read-back copies",
            "read-back waited",
            "read-back copied out",
            "after"
        ]
    );
    assert!(
        marks
            .windows(2)
            .all(|w| w[1].gpu_us >= w[0].gpu_us && w[1].host_us >= w[0].host_us)
    );
    // Each spin is 2e7 cycles: at most 2 GHz, 10 ms on the GPU, which the host waited for before its last mark.
    assert!(marks[2].gpu_us > 15_000.0, "{marks:?}");
    assert!(marks[4].host_us > 15_000.0, "{marks:?}");
    assert!(
        marks[6].host_us >= marks[5].host_us && marks[5].host_us >= marks[4].host_us,
        "{marks:?}"
    );
    assert!(gpu.take_marks().unwrap().is_empty());
}
