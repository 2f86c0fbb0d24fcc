//! `rms_norm_quant` and `swiglu_quant` give `rms_norm`'s and `swiglu`'s bits and `fp8_gemm_quant`'s codes and scales of them, whose round trip is the CPU quantiser's (skips, saying why, without a GPU).

use tensorfold_kernels::Faults;
use tensorfold_kernels::cpu::quant::round_trip_e4m3_block;
use tensorfold_kernels::cuda::{self, CudaLaunch, Gpu};
use tensorfold_kernels::fp8_gemm::cuda::{KERNEL as FP8, quant_blocks};
use tensorfold_kernels::rms_norm::rms_norm_cuda;
use tensorfold_kernels::rms_norm_quant::{dequantised, rms_norm_quant_cuda};
use tensorfold_kernels::swiglu::swiglu_cuda;
use tensorfold_kernels::swiglu_quant::swiglu_quant_cuda;

/// Deterministic values spread over a few binades, some near e4m3 rounding midpoints after the norm.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = ((s >> 40) as f32) / (1u64 << 24) as f32;
            scale * (u - 0.5) * if (s >> 20).is_multiple_of(7) { 8.0 } else { 1.0 }
        })
        .collect()
}

/// `fp8_gemm_quant`'s codes (row stride `dim` rounded up to 8) and scales of rows `y` of `dim`.
fn gemm_quant(gpu: &Gpu, launch: &CudaLaunch, y: &[f32], dim: usize) -> (Vec<u16>, Vec<f32>) {
    let rows = y.len() / dim;
    let quant = gpu.function(&FP8, "fp8_gemm_quant", Faults::NONE).unwrap();
    let yd = gpu.upload(y).unwrap();
    let mut q = gpu.zeros::<u16>(rows * dim.next_multiple_of(8)).unwrap();
    let mut s = gpu.zeros::<f32>(rows * dim.div_ceil(128)).unwrap();
    let (m, k) = (rows as i32, dim as i32);
    let mut b = gpu.launch_builder(&quant);
    b.arg(&yd).arg(&mut q).arg(&mut s).arg(&m).arg(&k);
    // SAFETY: the arguments match fp8_gemm_quant's signature; q holds `rows` rows of dim rounded up to 8 and s a scale per 128 values.
    unsafe { b.launch(launch.config(quant_blocks(launch, rows, dim))) }.unwrap();
    (gpu.stream.clone_dtoh(&q).unwrap(), gpu.stream.clone_dtoh(&s).unwrap())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Fused outputs `(y, q, s)` against the unfused `y` and the GEMMs' quantiser of it, and the round trip against the CPU quantiser.
fn same_as_unfused(
    gpu: &Gpu,
    launch: &CudaLaunch,
    what: &str,
    dim: usize,
    unfused: &[f32],
    fused: (&[f32], &[u16], &[f32]),
) {
    let (y, q, s) = fused;
    let kp = dim.next_multiple_of(8);
    let (q1, s1) = gemm_quant(gpu, launch, unfused, dim);
    assert_eq!(
        bits(unfused),
        bits(y),
        "{what}: the values differ from the unfused kernel's"
    );
    assert_eq!(bits(&s1), bits(s), "{what}: the scales differ from fp8_gemm_quant's");
    for r in 0..y.len() / dim {
        let row = r * kp..r * kp + dim;
        assert_eq!(
            q1[row.clone()],
            q[row],
            "{what}: row {r}'s codes differ from fp8_gemm_quant's"
        );
    }
    let mut cq = y.to_vec();
    for row in cq.chunks_mut(dim) {
        row.chunks_mut(128).for_each(round_trip_e4m3_block);
    }
    assert_eq!(
        bits(&cq),
        bits(&dequantised(q, s, dim)),
        "{what}: the CPU quantiser's round trip differs"
    );
}

fn gpu_or_skip(test: &str) -> Option<&'static Gpu> {
    match cuda::gpu() {
        Ok(g) => Some(g),
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

#[test]
fn rms_norm_quant_matches_rms_norm_then_the_gemm_quantiser_bit_for_bit() {
    let Some(gpu) = gpu_or_skip("rms_norm_quant_matches_rms_norm_then_the_gemm_quantiser_bit_for_bit") else {
        return;
    };
    for launch in [CudaLaunch::new(256, 65_535), CudaLaunch::new(64, 7)] {
        for (rows, dim) in [(1usize, 4096usize), (1, 1024), (3, 7168), (5, 257), (2, 33)] {
            let (kp, nblk) = (dim.next_multiple_of(8), dim.div_ceil(128));
            let x = values(rows * dim, (rows * 31 + dim) as u64, 6.0);
            let w: Vec<f32> = values(dim, dim as u64, 0.4).iter().map(|v| 1.0 + v).collect();
            let eps = 1e-6f32;
            let mut y1 = vec![0f32; rows * dim];
            rms_norm_cuda(&launch, &x, &w, eps, &mut y1, Faults::NONE).unwrap();
            let (mut y2, mut q2, mut s2) = (vec![0f32; rows * dim], vec![0u16; rows * kp], vec![0f32; rows * nblk]);
            rms_norm_quant_cuda(&launch, &x, &w, eps, &mut y2, &mut q2, &mut s2, Faults::NONE).unwrap();
            let what = format!("rms_norm_quant {rows}x{dim} {launch:?}");
            same_as_unfused(gpu, &launch, &what, dim, &y1, (&y2, &q2, &s2));
        }
    }
}

#[test]
fn swiglu_quant_matches_swiglu_then_the_gemm_quantiser_bit_for_bit() {
    let Some(gpu) = gpu_or_skip("swiglu_quant_matches_swiglu_then_the_gemm_quantiser_bit_for_bit") else {
        return;
    };
    for launch in [CudaLaunch::new(256, 65_535), CudaLaunch::new(64, 7)] {
        for (rows, inter) in [(6usize, 2048usize), (1, 2048), (3, 257), (2, 33)] {
            let (kp, nblk) = (inter.next_multiple_of(8), inter.div_ceil(128));
            let g = values(rows * inter, (rows * 7 + inter) as u64, 24.0);
            let u = values(rows * inter, (rows * 5 + inter) as u64, 30.0);
            let route: Vec<f32> = values(rows, rows as u64, 2.0).iter().map(|v| 1.0 + v).collect();
            let mut h1 = vec![0f32; rows * inter];
            swiglu_cuda(&launch, &g, &u, &route, 10.0, &mut h1, Faults::NONE).unwrap();
            let (mut h2, mut q2, mut s2) = (vec![0f32; rows * inter], vec![0u16; rows * kp], vec![0f32; rows * nblk]);
            swiglu_quant_cuda(&launch, &g, &u, &route, 10.0, &mut h2, &mut q2, &mut s2, Faults::NONE).unwrap();
            let what = format!("swiglu_quant {rows}x{inter} {launch:?}");
            same_as_unfused(gpu, &launch, &what, inter, &h1, (&h2, &q2, &s2));
        }
    }
}
