//! Every SIMD path this CPU has, forced one by one, gives the FP8 and MXFP4 GEMMs the bits of the fastest path.

use tensorfold_kernels::Faults;
use tensorfold_kernels::cpu::{CpuLaunch, SimdPath};
use tensorfold_kernels::fp8_gemm::fp8_gemm;
use tensorfold_kernels::mxfp4_gemm::mxfp4_gemm;

/// Deterministic bytes.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Activations of mixed magnitude, with exact zeros and tiny values that quantise to e4m3 subnormals.
fn activations(seed: u64, len: usize) -> Vec<f32> {
    bytes(seed, len)
        .iter()
        .enumerate()
        .map(|(i, &b)| match i % 13 {
            0 => 0.0,
            1 => (b as f32 - 128.0) * 1e-6,
            _ => (b as f32 - 128.0) / 16.0 * if i % 7 == 0 { 40.0 } else { 1.0 },
        })
        .collect()
}

/// Weight codes where every 9th is an e4m3 subnormal or zero (the codes a bf16 table must rebias).
fn fp8_weights(seed: u64, len: usize) -> Vec<u8> {
    bytes(seed, len)
        .iter()
        .enumerate()
        .map(|(i, &b)| if i % 9 == 0 { b & 0x87 } else { b })
        .collect()
}

/// Every (path, threads, tile rows) launch this CPU can run.
fn launches() -> Vec<CpuLaunch> {
    let mut out = Vec::new();
    for simd in SimdPath::available() {
        for threads in [1, 2] {
            for tile_rows in [usize::MAX, 1] {
                out.push(CpuLaunch {
                    threads,
                    simd,
                    tile_rows,
                    split_min: 0,
                    gemv_simd: None,
                    packed: false,
                });
            }
        }
    }
    // The serving defaults, with this CPU's GEMV path where it has one.
    out.push(CpuLaunch::serial());
    out.push(CpuLaunch::serving(2));
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Runs `gemm` under every launch and checks each against the best path with one thread.
fn check_all(label: &str, rows: usize, n: usize, gemm: impl Fn(&CpuLaunch, &mut [f32])) {
    let best = CpuLaunch::serial();
    let mut want = vec![0f32; rows * n];
    gemm(&best, &mut want);
    assert!(want.iter().all(|v| v.is_finite()), "{label}: non-finite output");
    assert!(want.iter().any(|&v| v != 0.0), "{label}: all zero");
    for launch in launches() {
        let mut got = vec![f32::NAN; rows * n];
        gemm(&launch, &mut got);
        assert_eq!(bits(&got), bits(&want), "{label}: {launch} differs from {best}");
    }
}

#[test]
fn fp8_gemm_bits_equal_on_every_path() {
    if !SimdPath::available().contains(&SimdPath::Avx512Bf16) {
        println!("no AVX-512-BF16 on this CPU: comparing the other paths only");
    }
    for (rows, n, k) in [(1, 37, 1031), (1, 300, 4096), (2, 33, 257), (5, 129, 640), (9, 17, 128)] {
        let x = activations(rows as u64 * 7 + k as u64, rows * k);
        let w = fp8_weights(n as u64 * 3 + 1, n * k);
        let s: Vec<u8> = bytes(k as u64, n.div_ceil(128) * k.div_ceil(128))
            .iter()
            .map(|b| 118 + b % 8)
            .collect();
        check_all(&format!("fp8 rows {rows} [{n}, {k}]"), rows, n, |l, out| {
            fp8_gemm(&x, &w, &s, n, k, out, l, Faults::NONE)
        });
    }
}

#[test]
fn mxfp4_gemm_bits_equal_on_every_path() {
    if !SimdPath::available().contains(&SimdPath::Avx512Bf16) {
        println!("no AVX-512-BF16 on this CPU: comparing the other paths only");
    }
    for (rows, n, k) in [(1, 37, 1056), (1, 64, 4096), (2, 33, 160), (5, 31, 96), (6, 18, 2048)] {
        let x = activations(rows as u64 * 5 + k as u64, rows * k);
        let w = bytes(n as u64 * 11 + 3, n * k / 2);
        let s: Vec<u8> = bytes(k as u64 + 9, n * k / 32).iter().map(|b| 120 + b % 8).collect();
        check_all(&format!("mxfp4 rows {rows} [{n}, {k}]"), rows, n, |l, out| {
            mxfp4_gemm(&x, &w, &s, n, k, out, l, Faults::NONE)
        });
    }
    // One row on a coarse grid (two-digit chunks), mixed with fine chunks, through the whole-range GEMV's staggered streams.
    for (n, k) in [(300, 2048), (257, 4096)] {
        let x: Vec<f32> = bytes(k as u64, k)
            .iter()
            .enumerate()
            .map(|(i, &b)| match i / 128 % 3 {
                0 => (b as f32 - 128.0) * 1e-5,
                _ => b as f32 / 64.0 - 2.0,
            })
            .collect();
        let w = bytes(n as u64 * 13 + 1, n * k / 2);
        let s: Vec<u8> = bytes(k as u64 + 5, n * k / 32).iter().map(|b| 118 + b % 8).collect();
        check_all(&format!("mxfp4 coarse row [{n}, {k}]"), 1, n, |l, out| {
            mxfp4_gemm(&x, &w, &s, n, k, out, l, Faults::NONE)
        });
    }
}
