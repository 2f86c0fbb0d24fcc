//! `rms_norm_quant` gives `rms_norm`'s bits and `fp8_gemm_quant`'s codes and scales of them, whose round trip is the CPU quantiser's (skips, saying why, without a GPU).

use tensorfold_kernels::Faults;
use tensorfold_kernels::cpu::quant::round_trip_e4m3_block;
use tensorfold_kernels::cuda::{self, CudaLaunch};
use tensorfold_kernels::fp8_gemm::cuda::{KERNEL as FP8, quant_blocks};
use tensorfold_kernels::rms_norm::rms_norm_cuda;
use tensorfold_kernels::rms_norm_quant::{dequantised, rms_norm_quant_cuda};

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

#[test]
fn rms_norm_quant_matches_rms_norm_then_the_gemm_quantiser_bit_for_bit() {
    let gpu = match cuda::gpu() {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipping rms_norm_quant_matches_rms_norm_then_the_gemm_quantiser_bit_for_bit: {why}");
            return;
        }
    };
    let launch = CudaLaunch::new(256, 65_535);
    for (rows, dim) in [(1usize, 4096usize), (1, 1024), (3, 7168), (5, 257), (2, 33)] {
        let (kp, nblk) = (dim.next_multiple_of(8), dim.div_ceil(128));
        let x = values(rows * dim, (rows * 31 + dim) as u64, 6.0);
        let w: Vec<f32> = values(dim, dim as u64, 0.4).iter().map(|v| 1.0 + v).collect();
        let eps = 1e-6f32;
        let mut y1 = vec![0f32; rows * dim];
        rms_norm_cuda(&launch, &x, &w, eps, &mut y1, Faults::NONE).unwrap();
        // The GEMMs' own quantiser on rms_norm's output.
        let quant = gpu.function(&FP8, "fp8_gemm_quant", Faults::NONE).unwrap();
        let yd = gpu.upload(&y1).unwrap();
        let mut q1 = gpu.zeros::<u16>(rows * kp).unwrap();
        let mut s1 = gpu.zeros::<f32>(rows * nblk).unwrap();
        let (m, k) = (rows as i32, dim as i32);
        let mut b = gpu.launch_builder(&quant);
        b.arg(&yd).arg(&mut q1).arg(&mut s1).arg(&m).arg(&k);
        // SAFETY: the arguments match fp8_gemm_quant's signature; q1 holds `rows` rows of `kp` and s1 `rows * nblk` values.
        unsafe { b.launch(launch.config(quant_blocks(&launch, rows, dim))) }.unwrap();
        let (q1, s1) = (gpu.stream.clone_dtoh(&q1).unwrap(), gpu.stream.clone_dtoh(&s1).unwrap());
        let (mut y2, mut q2, mut s2) = (vec![0f32; rows * dim], vec![0u16; rows * kp], vec![0f32; rows * nblk]);
        rms_norm_quant_cuda(&launch, &x, &w, eps, &mut y2, &mut q2, &mut s2, Faults::NONE).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&y1),
            bits(&y2),
            "{rows}x{dim}: the normed rows differ from rms_norm's"
        );
        assert_eq!(
            bits(&s1),
            bits(&s2),
            "{rows}x{dim}: the scales differ from fp8_gemm_quant's"
        );
        for r in 0..rows {
            let row = r * kp..r * kp + dim;
            assert_eq!(
                q1[row.clone()],
                q2[row],
                "{rows}x{dim}: row {r}'s codes differ from fp8_gemm_quant's"
            );
        }
        // The round trip of the GPU's rows is the CPU quantiser's, bit for bit.
        let mut cq = y2.clone();
        for row in cq.chunks_mut(dim) {
            row.chunks_mut(128).for_each(round_trip_e4m3_block);
        }
        assert_eq!(
            bits(&cq),
            bits(&dequantised(&q2, &s2, dim)),
            "{rows}x{dim}: the CPU's round trip differs"
        );
    }
}
