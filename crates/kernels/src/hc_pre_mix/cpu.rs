//! CPU `hc_pre_mix`: each row's gates as `hc_split_sinkhorn` makes them, then `hc_pre`'s FMA chains.

use crate::cpu::CpuLaunch;
use crate::cpu::math::sigmoid;
use crate::faults::Faults;
use crate::hc_pre::hc_pre;

/// `y[r] = sum_i pre_i * x[r, i]` with `pre_i = sigmoid(mix[r, i] * scale[0] + base[i]) + eps` (mix rows [(2 + hc) * hc]).
#[allow(clippy::too_many_arguments)]
pub fn hc_pre_mix(
    x: &[f32],
    mix: &[f32],
    scale: &[f32],
    base: &[f32],
    hc: usize,
    dim: usize,
    eps: f32,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let width = (2 + hc) * hc;
    assert!(
        hc >= 1 && !scale.is_empty() && base.len() >= hc,
        "hc_pre_mix: scale must hold 1 value, base {hc}"
    );
    assert_eq!(mix.len() % width, 0, "hc_pre_mix: mix is not whole rows of {width}");
    let s0 = if faults.on("lost_pre_scale") { 1.0 } else { scale[0] };
    let pre: Vec<f32> = mix
        .chunks(width)
        .flat_map(|m| (0..hc).map(move |j| sigmoid(m[j].mul_add(s0, base[j])) + eps))
        .collect();
    hc_pre(x, &pre, hc, dim, out, launch, faults);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::SimdPath;
    use crate::hc_split_sinkhorn::hc_split_sinkhorn;

    #[test]
    fn matches_the_sinkhorn_gates_then_hc_pre_bit_for_bit() {
        let (rows, hc, dim, eps) = (3, 4, 129, 1e-6f32);
        let width = (2 + hc) * hc;
        let wave = |n: usize, k: f32| (0..n).map(|i| (i as f32 * k).sin() * 3.0).collect::<Vec<f32>>();
        let (x, mix, base) = (wave(rows * hc * dim, 0.37), wave(rows * width, 1.13), wave(width, 0.71));
        let scale = [0.9f32, 1.3, 0.6];
        for simd in SimdPath::available() {
            let launch = CpuLaunch {
                threads: 2,
                simd,
                ..CpuLaunch::serial()
            };
            let (mut pre, mut post, mut comb) =
                (vec![0f32; rows * hc], vec![0f32; rows * hc], vec![0f32; rows * hc * hc]);
            hc_split_sinkhorn(
                &mix,
                &scale,
                &base,
                hc,
                20,
                eps,
                &mut pre,
                &mut post,
                &mut comb,
                &launch,
                Faults::NONE,
            );
            let mut want = vec![0f32; rows * dim];
            hc_pre(&x, &pre, hc, dim, &mut want, &launch, Faults::NONE);
            let mut got = vec![1f32; rows * dim];
            hc_pre_mix(&x, &mix, &scale, &base, hc, dim, eps, &mut got, &launch, Faults::NONE);
            assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{simd}");
        }
    }
}
