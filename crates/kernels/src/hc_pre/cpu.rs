//! CPU `hc_pre`: rows split over threads; each output element an FMA chain over the streams in ascending order.

use crate::cpu::{CpuLaunch, SimdPath, par_chunks_mut};
use crate::faults::Faults;

/// Most terms `fma_terms` callers put on the stack (hc streams plus one).
pub(crate) const MAX_TERMS: usize = 17;

/// `y[r] = sum_i pre[r, i] * x[r, i]` over `hc` streams of `dim` values (x rows [hc, dim], pre rows [hc]).
pub fn hc_pre(x: &[f32], pre: &[f32], hc: usize, dim: usize, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    assert!((1..MAX_TERMS).contains(&hc), "hc_pre: hc {hc} outside 1..{MAX_TERMS}");
    assert_eq!(pre.len() % hc, 0, "hc_pre: pre is not whole rows of {hc}");
    let rows = pre.len() / hc;
    assert_eq!(
        (x.len(), out.len()),
        (rows * hc * dim, rows * dim),
        "hc_pre: x must be [rows, {hc}, {dim}], out [rows, {dim}]"
    );
    let skip_last = faults.on("skip_last_row");
    let drop_last_stream = faults.on("drop_last_stream");
    let reversed = faults.on("order_by_tile") && launch.tile_rows == 1;
    par_chunks_mut(out, dim, launch.split_threads(out.len()), |first_row, chunk| {
        for (i, y) in chunk.chunks_mut(dim.max(1)).enumerate() {
            let r = first_row + i;
            if skip_last && r + 1 == rows {
                continue;
            }
            let used = if drop_last_stream { hc - 1 } else { hc };
            let mut terms: [(f32, &[f32]); MAX_TERMS] = [(0.0, &[]); MAX_TERMS];
            for (s, term) in terms[..used].iter_mut().enumerate() {
                let s = if reversed { hc - 1 - s } else { s };
                *term = (pre[r * hc + s], &x[(r * hc + s) * dim..(r * hc + s + 1) * dim]);
            }
            fma_terms(&terms[..used], y, launch.simd);
        }
    });
}

/// `out[d] = fma(w_n, v_n[d], ... fma(w_1, v_1[d], fma(w_0, v_0[d], 0)))`: terms in the given order, one rounding each.
pub(crate) fn fma_terms(terms: &[(f32, &[f32])], out: &mut [f32], simd: SimdPath) {
    assert!(
        terms.iter().all(|(_, v)| v.len() == out.len()),
        "fma_terms: term lengths differ from the output"
    );
    match simd {
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx512 | SimdPath::Avx512Bf16 => {
            assert!(is_x86_feature_detected!("avx512f"));
            // SAFETY: the feature is present, checked above.
            unsafe { fma_terms_avx512(terms, out) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: the features are present, checked above.
            unsafe { fma_terms_avx2(terms, out) }
        }
        _ => fma_terms_body(terms, out),
    }
}

/// The one body every path compiles; `mul_add` is a correctly rounded FMA everywhere, so all paths agree in bits.
#[inline(always)]
fn fma_terms_body(terms: &[(f32, &[f32])], out: &mut [f32]) {
    out.fill(0.0);
    for &(w, v) in terms {
        for (o, &a) in out.iter_mut().zip(v) {
            *o = w.mul_add(a, *o);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_terms_avx512(terms: &[(f32, &[f32])], out: &mut [f32]) {
    fma_terms_body(terms, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_terms_avx2(terms: &[(f32, &[f32])], out: &mut [f32]) {
    fma_terms_body(terms, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_gives_the_same_bits() {
        let v: Vec<Vec<f32>> = (0..5)
            .map(|t| {
                (0..1003)
                    .map(|i| ((i * 7 + t * 13) % 97) as f32 * 0.37 - 17.0)
                    .collect()
            })
            .collect();
        let terms: Vec<(f32, &[f32])> = v
            .iter()
            .enumerate()
            .map(|(t, v)| (0.3 + t as f32 * 0.71, v.as_slice()))
            .collect();
        let mut want = vec![0f32; 1003];
        fma_terms(&terms, &mut want, SimdPath::Portable);
        for simd in SimdPath::available() {
            let mut got = vec![1f32; 1003];
            fma_terms(&terms, &mut got, simd);
            assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{simd}");
        }
    }
}
