//! `hc_in` gives the bits of the chain it fuses (`hc_mix`, `hc_split_sinkhorn`, `hc_pre`, `rms_norm_quant`), launch after launch (skips, saying why, without a GPU).

use tensorfold_kernels::Faults;
use tensorfold_kernels::cuda::{self, CudaLaunch, Gpu};
use tensorfold_kernels::hc_in::{HcInOut, HcInWeights, hc_in_cuda};
use tensorfold_kernels::hc_mix::hc_mix_cuda;
use tensorfold_kernels::hc_pre::hc_pre_cuda;
use tensorfold_kernels::hc_split_sinkhorn::hc_split_sinkhorn_cuda;
use tensorfold_kernels::rms_norm_quant::rms_norm_quant_cuda;

/// Deterministic values in `[-scale / 2, scale / 2)`.
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

fn gpu_or_skip(test: &str) -> Option<&'static Gpu> {
    match cuda::gpu() {
        Ok(g) => Some(g),
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

/// Every buffer either path writes: mix, pre, post, comb, y, yn, codes and scales.
type Written = (
    Vec<f32>,
    Vec<f32>,
    Vec<f32>,
    Vec<f32>,
    Vec<f32>,
    Vec<f32>,
    Vec<u16>,
    Vec<f32>,
);

fn zeros(rows: usize, hc: usize, dim: usize) -> Written {
    let f = |n| vec![0f32; n];
    (
        f(rows * (2 + hc) * hc),
        f(rows * hc),
        f(rows * hc),
        f(rows * hc * hc),
        f(rows * dim),
        f(rows * dim),
        vec![0u16; rows * dim.next_multiple_of(8)],
        f(rows * dim.div_ceil(128)),
    )
}

#[test]
fn hc_in_matches_the_chain_it_fuses_bit_for_bit_every_launch() {
    let Some(_gpu) = gpu_or_skip("hc_in_matches_the_chain_it_fuses_bit_for_bit_every_launch") else {
        return;
    };
    let (iters, eps) = (20, 1e-6f32);
    for launch in [
        CudaLaunch::new(512, 65_535),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(256, 1),
    ] {
        for (rows, hc, dim) in [
            (1usize, 4usize, 4096usize),
            (3, 4, 4096),
            (40, 4, 257),
            (2, 4, 4099),
            (5, 2, 33),
        ] {
            let width = (2 + hc) * hc;
            let x = values(rows * hc * dim, (rows * 31 + dim) as u64, 6.0);
            let hc_fn = values(width * hc * dim, dim as u64, 4.0 / ((hc * dim) as f32).sqrt());
            let scale: Vec<f32> = values(3, 5, 1.0).iter().map(|v| 1.0 + v).collect();
            let base = values(width, 9, 1.0);
            let norm: Vec<f32> = values(dim, 11, 0.4).iter().map(|v| 1.0 + v).collect();
            let mut a = zeros(rows, hc, dim);
            hc_mix_cuda(&launch, &x, &hc_fn, hc * dim, eps, &mut a.0, Faults::NONE).unwrap();
            hc_split_sinkhorn_cuda(
                &launch,
                &a.0,
                &scale,
                &base,
                hc,
                iters,
                eps,
                &mut a.1,
                &mut a.2,
                &mut a.3,
                Faults::NONE,
            )
            .unwrap();
            hc_pre_cuda(&launch, &x, &a.1, hc, dim, &mut a.4, Faults::NONE).unwrap();
            rms_norm_quant_cuda(&launch, &a.4, &norm, eps, &mut a.5, &mut a.6, &mut a.7, Faults::NONE).unwrap();
            // Twice: the second launch finds the arrival counts the first left at zero.
            for run in 0..2 {
                let mut b = zeros(rows, hc, dim);
                let w = HcInWeights {
                    hc_fn: (&hc_fn).into(),
                    scale: (&scale).into(),
                    base: (&base).into(),
                    norm: (&norm).into(),
                };
                let out = HcInOut {
                    mix: (&mut b.0).into(),
                    pre: (&mut b.1).into(),
                    post: (&mut b.2).into(),
                    comb: (&mut b.3).into(),
                    y: (&mut b.4).into(),
                    yn: (&mut b.5).into(),
                    q: (&mut b.6).into(),
                    scales: (&mut b.7).into(),
                };
                hc_in_cuda(&launch, &x, w, hc, iters, eps, eps, out, Faults::NONE).unwrap();
                let what = format!("hc_in {rows}x{hc}x{dim} {launch:?} run {run}");
                for (name, p, q) in [
                    ("mix", &a.0, &b.0),
                    ("pre", &a.1, &b.1),
                    ("post", &a.2, &b.2),
                    ("comb", &a.3, &b.3),
                    ("y", &a.4, &b.4),
                    ("yn", &a.5, &b.5),
                    ("scales", &a.7, &b.7),
                ] {
                    assert_eq!(bits(p), bits(q), "{what}: {name} differs from the chain's");
                }
                let kp = dim.next_multiple_of(8);
                for r in 0..rows {
                    let row = r * kp..r * kp + dim;
                    assert_eq!(
                        a.6[row.clone()],
                        b.6[row],
                        "{what}: row {r}'s codes differ from the chain's"
                    );
                }
            }
        }
    }
}

/// hc_in's error for `rows` rows of one stream of one value, launched as `launch`.
fn refusal(rows: usize, launch: CudaLaunch) -> String {
    let (x, one) = (vec![1f32; rows], vec![1f32; 1]);
    let (scale, base) = (vec![1f32; 3], vec![0f32; 3]);
    let mut b = zeros(rows, 1, 1);
    let w = HcInWeights {
        hc_fn: (&base).into(),
        scale: (&scale).into(),
        base: (&base).into(),
        norm: (&one).into(),
    };
    let out = HcInOut {
        mix: (&mut b.0).into(),
        pre: (&mut b.1).into(),
        post: (&mut b.2).into(),
        comb: (&mut b.3).into(),
        y: (&mut b.4).into(),
        yn: (&mut b.5).into(),
        q: (&mut b.6).into(),
        scales: (&mut b.7).into(),
    };
    hc_in_cuda(&launch, &x, w, 1, 1, 1e-6, 1e-6, out, Faults::NONE).unwrap_err()
}

#[test]
fn hc_in_refuses_more_rows_than_its_counts_hold_and_names_the_way_out() {
    let rows = cuda::COUNTS + 1;
    let e = refusal(rows, CudaLaunch::new(64, 7));
    assert!(e.contains("unfused chain") && e.contains(&rows.to_string()), "{e}");
}

#[test]
fn hc_in_refuses_blocks_without_a_warp_for_comb_beside_the_rest() {
    for block in [32, 96 + 16] {
        let e = refusal(2, CudaLaunch::new(block, 7));
        assert!(e.contains("whole warps, at least two"), "{block}: {e}");
    }
}
