//! An upload ahead lands while the process stream is still busy, the process stream sees it, and the next upload of its key waits for the readers of the last (skips, saying why, without a GPU).

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig};
use tensorfold_kernels::Faults;
use tensorfold_kernels::cuda::{self, CudaKernel, Gpu};

static PROBE: CudaKernel = CudaKernel {
    name: "ahead_probe",
    source: r#"
extern "C" __global__ void ahead_probe_watch(const volatile float* buf, float marker, float* seen, long long spin) {
    tf_grid_begin();
    if (threadIdx.x != 0) return;
    long long t0 = clock64();
    float s = 0.0f;
    while (clock64() - t0 < spin) {
        if (buf[0] == marker) {
            s = 1.0f;
            break;
        }
    }
    seen[0] = s;
}
extern "C" __global__ void ahead_probe_copy(const volatile float* buf, float* out, int n, long long spin) {
    tf_grid_begin();
    if (threadIdx.x != 0) return;
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    for (int i = 0; i < n; ++i) out[i] = buf[i];
}
"#,
    entries: &["ahead_probe_watch", "ahead_probe_copy"],
    controls: &[],
    records: &[],
};

/// About a tenth of a second of an SM's clock.
const SPIN: i64 = 200_000_000;

fn gpu_or_skip() -> Option<&'static Gpu> {
    match cuda::gpu() {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skipping: no CUDA device ({e})");
            None
        }
    }
}

/// Uploads `v` ahead under `key`, returning the alias's device address (the alias itself is leaked, as the contract asks).
fn upload(gpu: &Gpu, key: u64, v: &[f32]) -> (u64, Vec<f32>) {
    // SAFETY: the alias is leaked below, and each test ends the loan after its readers.
    let alias = unsafe { gpu.upload_ahead(key, v) }.unwrap();
    let seen = gpu.stream.clone_dtoh(&alias.slice(..v.len())).unwrap();
    let ptr = alias.device_ptr(&gpu.stream).0;
    alias.leak();
    (ptr, seen)
}

/// One test, so no other test's kernels share the process stream or its waits the upload stream.
#[test]
fn uploads_ahead_land_early_and_wait_for_their_readers() {
    let Some(gpu) = gpu_or_skip() else { return };
    an_upload_ahead_lands_while_the_process_stream_is_busy(gpu);
    the_next_upload_of_a_key_waits_for_the_last_ones_readers(gpu);
}

fn an_upload_ahead_lands_while_the_process_stream_is_busy(gpu: &Gpu) {
    let (ptr, first) = upload(gpu, 1, &[1.0, 2.0, 3.0]);
    assert_eq!(first, [1.0, 2.0, 3.0]);
    // SAFETY: the alias of an upload ahead is never freed through this handle: it is leaked below.
    let err = unsafe { gpu.upload_ahead(1, &[4.0]) }.map(|a| a.leak());
    assert!(err.is_err(), "a second upload of a lent key must be refused");
    gpu.ahead_done(1).unwrap();
    let watch = gpu.function(&PROBE, "ahead_probe_watch", Faults::NONE).unwrap();
    let seen: CudaSlice<f32> = gpu.zeros(1).unwrap();
    let marker = 7.5f32;
    let mut b = gpu.launch_builder(&watch);
    b.arg(&ptr).arg(&marker).arg(&seen).arg(&SPIN);
    // SAFETY: the arguments match ahead_probe_watch's signature; `ptr` heads the key's buffer of at least one float and `seen` holds one.
    unsafe { b.launch(LaunchConfig::for_num_elems(1)) }.unwrap();
    // The buffer does not grow, so the watcher reads where this upload writes.
    let (again, values) = upload(gpu, 1, &[marker, 0.5]);
    assert_eq!(again, ptr);
    assert_eq!(values, [marker, 0.5]);
    assert_eq!(
        gpu.stream.clone_dtoh(&seen).unwrap(),
        [1.0],
        "the upload waited for the process stream's kernel instead of going ahead of it"
    );
    gpu.ahead_done(1).unwrap();
}

fn the_next_upload_of_a_key_waits_for_the_last_ones_readers(gpu: &Gpu) {
    let (ptr, _) = upload(gpu, 2, &[1.0, 2.0, 3.0, 4.0]);
    let copy = gpu.function(&PROBE, "ahead_probe_copy", Faults::NONE).unwrap();
    let out: CudaSlice<f32> = gpu.zeros(4).unwrap();
    let n = 4i32;
    let mut b = gpu.launch_builder(&copy);
    b.arg(&ptr).arg(&out).arg(&n).arg(&SPIN);
    // SAFETY: the arguments match ahead_probe_copy's signature; `ptr` heads four floats of the key's buffer and `out` holds four.
    unsafe { b.launch(LaunchConfig::for_num_elems(1)) }.unwrap();
    gpu.ahead_done(2).unwrap();
    let (again, values) = upload(gpu, 2, &[9.0, 9.0, 9.0, 9.0]);
    assert_eq!(again, ptr);
    assert_eq!(values, [9.0; 4]);
    assert_eq!(
        gpu.stream.clone_dtoh(&out).unwrap(),
        [1.0, 2.0, 3.0, 4.0],
        "the upload overwrote the buffer before its reader ran"
    );
    // A larger upload moves the key to a new buffer, after the old one's readers.
    let big: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    gpu.ahead_done(2).unwrap();
    let (_, values) = upload(gpu, 2, &big);
    assert_eq!(values, big);
    gpu.ahead_done(2).unwrap();
}
