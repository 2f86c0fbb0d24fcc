//! `hc_pre_mix` gives the bits of `hc_split_sinkhorn`'s `pre` fed to `hc_pre`, on the GPU (skips, saying why, without one).

use tensorfold_kernels::Faults;
use tensorfold_kernels::cuda::{self, CudaLaunch};
use tensorfold_kernels::hc_pre::hc_pre_cuda;
use tensorfold_kernels::hc_pre_mix::hc_pre_mix_cuda;
use tensorfold_kernels::hc_split_sinkhorn::hc_split_sinkhorn_cuda;

/// Deterministic values in (-scale / 2, scale / 2).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            scale * (((s >> 40) as f32) / (1u64 << 24) as f32 - 0.5)
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn hc_pre_mix_matches_the_sinkhorn_gates_then_hc_pre_bit_for_bit() {
    if let Err(why) = cuda::gpu() {
        eprintln!("skipping hc_pre_mix_matches_the_sinkhorn_gates_then_hc_pre_bit_for_bit: {why}");
        return;
    }
    let eps = 1e-6f32;
    for launch in [CudaLaunch::new(256, 65_535), CudaLaunch::new(64, 7)] {
        for (rows, hc, dim) in [(1usize, 4usize, 4096usize), (3, 4, 257), (2, 7, 33)] {
            let width = (2 + hc) * hc;
            let x = values(rows * hc * dim, (rows * 31 + dim) as u64, 6.0);
            let mix = values(rows * width, 7 + dim as u64, 5.0);
            let scale: Vec<f32> = values(3, 3, 1.0).iter().map(|v| 1.0 + v).collect();
            let base = values(width, 11, 1.0);
            let (mut pre, mut post, mut comb) =
                (vec![0f32; rows * hc], vec![0f32; rows * hc], vec![0f32; rows * hc * hc]);
            hc_split_sinkhorn_cuda(
                &launch,
                &mix,
                &scale,
                &base,
                hc,
                20,
                eps,
                &mut pre,
                &mut post,
                &mut comb,
                Faults::NONE,
            )
            .unwrap();
            let mut want = vec![0f32; rows * dim];
            hc_pre_cuda(&launch, &x, &pre, hc, dim, &mut want, Faults::NONE).unwrap();
            let mut got = vec![1f32; rows * dim];
            hc_pre_mix_cuda(&launch, &x, &mix, &scale, &base, hc, dim, eps, &mut got, Faults::NONE).unwrap();
            assert_eq!(bits(&want), bits(&got), "{rows}x{hc}x{dim} {launch:?}");
        }
    }
}
