//! The AVX-512 and AVX2 FP8 GEMVs over a thread's columns: four weight rows a quarter of the range apart per pass, so four pages stream at once.

use std::arch::x86_64::*;
use std::array::from_fn;
use std::ops::Range;

use tensorfold_formats::e8m0;

use super::cpu::BLOCK;
use super::x86::{block_acts, block_ptrs, block4, bytes4, prefetch, prefetch_l2};
use crate::gemm::x86::{bf16_pair8, reduce4, reduce4x8};

/// Bytes ahead in each of the four streams that a pass asks the cache for.
const AHEAD: usize = 2048;

/// Bytes ahead in each stream that a pass asks L2 for, so lines wait there well before L1 asks for them.
const AHEAD_L2: usize = 6144;

/// Columns `cols` of one activation row (`a`, block scales `sa`) against `w` [n, k] with scales [ceil(n/128), ceil(k/128)], as `rows_avx512` per column.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn gemv_avx512(
    a: &[u16],
    sa: &[f32],
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let blocks = k.div_ceil(BLOCK);
    assert!(a.len() >= blocks * BLOCK);
    // SAFETY: `blocks` whole blocks of activations, asserted above.
    let act: Vec<[__m512; 8]> = (0..blocks)
        .map(|kb| unsafe { block_acts(a.as_ptr().add(kb * BLOCK)) })
        .collect();
    // SAFETY: `streamed` hands whole (or padded) weight blocks.
    let lanes = |kb: usize, wb: &[*const u8; 4]| unsafe { block4(&act[kb], wb) };
    streamed(sa, w, w_scale, k, cols, out, lanes, |t| reduce4(t));
}

/// Columns `cols` of one activation row against `w` through VDPBF16PS, as `bf16::rows` per column (`flush` plants its denormal-table bug).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
pub unsafe fn gemv_bf16(
    a: &[u16],
    sa: &[f32],
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
    flush: bool,
) {
    assert!(a.len() >= k.div_ceil(BLOCK) * BLOCK);
    let t = super::bf16::Tables::new(flush);
    let undo = _mm_set1_ps(super::bf16::UNDO);
    // SAFETY: block kb of the activations exists (asserted above); `streamed` hands whole (or padded) weight blocks.
    let lanes = |kb: usize, wb: &[*const u8; 4]| -> [__m512; 4] {
        from_fn(|j| unsafe { super::bf16::block_lanes(a.as_ptr().add(kb * BLOCK), wb[j], &t) })
    };
    streamed(sa, w, w_scale, k, cols, out, lanes, |t| _mm_mul_ps(reduce4(t), undo));
}

/// An entry of the AVX2 GEMV compiled with `features`, which cover AVX2 and FMA.
macro_rules! avx2_entry {
    ($(#[$doc:meta])* $name:ident, $features:literal) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub unsafe fn $name(
            a: &[u16],
            sa: &[f32],
            w: &[u8],
            w_scale: &[u8],
            k: usize,
            cols: Range<usize>,
            out: &mut [f32],
        ) {
            let blocks = k.div_ceil(BLOCK);
            assert!(a.len() >= blocks * BLOCK);
            let act = lane_acts(a, blocks);
            // SAFETY: `act` holds 16 vectors a block; `streamed` hands whole (or padded) weight blocks.
            let lanes = |kb: usize, wb: &[*const u8; 4]| unsafe { block4_avx2(&act[16 * kb..][..16], wb) };
            streamed(sa, w, w_scale, k, cols, out, lanes, |t| reduce4x8(t));
        }
    };
}

avx2_entry!(
    /// Columns `cols` of one activation row against `w`, as `rows_avx2` per column; the activations are decoded once a call.
    gemv_avx2,
    "avx2,fma"
);
avx2_entry!(
    /// `gemv_avx2` with AVX-512 VL's 32 vector registers, which hold four rows' decoded weights without spills: the same bits.
    gemv_avx2_vl,
    "avx2,fma,avx512f,avx512vl"
);

/// The passes of both GEMVs: stream j walks columns j * quarter.. in order; `lanes(kb, blocks)` gives block kb's four rows of lanes and `reduce` their four sums.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma")]
fn streamed<T: Copy>(
    sa: &[f32],
    w: &[u8],
    w_scale: &[u8],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
    lanes: impl Fn(usize, &[*const u8; 4]) -> T,
    reduce: impl Fn(T) -> __m128,
) {
    // A 64-byte-aligned frame, so the lanes' 32-byte spill slots sit where the frame puts them, never across a cache line whatever the thread's stack offset.
    let frame = Align64([0; 64]);
    std::hint::black_box(&frame.0);
    let (full, blocks) = (k / BLOCK, k.div_ceil(BLOCK));
    let len = cols.len();
    assert!(len > 0 && out.len() == len && sa.len() >= blocks);
    assert!(cols.end * k <= w.len() && w_scale.len() >= cols.end.div_ceil(BLOCK) * blocks);
    let quarter = len.div_ceil(4);
    // Stream j's decoded weight scales for its current 128-column block, block-major: swd[4 kb + j].
    let mut swd = vec![0f32; 4 * blocks];
    let mut scale_row = [usize::MAX; 4];
    let mut pad = [[0u8; BLOCK]; 4];
    for t in 0..quarter {
        // A short last stream repeats its last column unstored.
        let idx: [usize; 4] = from_fn(|j| (j * quarter + t).min(len - 1));
        let rows: [&[u8]; 4] = from_fn(|j| &w[(cols.start + idx[j]) * k..][..k]);
        for (j, &i) in idx.iter().enumerate() {
            let sr = (cols.start + i) / BLOCK;
            if sr != scale_row[j] {
                scale_row[j] = sr;
                for (kb, &c) in w_scale[sr * blocks..][..blocks].iter().enumerate() {
                    swd[4 * kb + j] = e8m0::TABLE[c as usize];
                }
            }
        }
        let mut acc = _mm_setzero_ps();
        // The previous block's lanes and scales: its sums are reduced after this block's lanes are issued, so their latency hides.
        let mut held = None;
        for (kb, &sa) in sa.iter().enumerate().take(blocks) {
            let wb = block_ptrs(&rows, kb, full, k, &mut pad);
            for p in wb {
                prefetch(p.wrapping_add(AHEAD));
                prefetch_l2(p.wrapping_add(AHEAD_L2));
            }
            // SAFETY: swd holds four scales a block.
            let sw = unsafe { _mm_loadu_ps(swd.as_ptr().add(4 * kb)) };
            if let Some((t, s)) = held.replace((lanes(kb, &wb), _mm_mul_ps(_mm_set1_ps(sa), sw))) {
                acc = _mm_fmadd_ps(reduce(t), s, acc);
            }
        }
        if let Some((t, s)) = held {
            acc = _mm_fmadd_ps(reduce(t), s, acc);
        }
        let mut four = [0f32; 4];
        // SAFETY: four floats.
        unsafe { _mm_storeu_ps(four.as_mut_ptr(), acc) };
        for (j, &v) in four.iter().enumerate() {
            if j * quarter + t < len {
                out[idx[j]] = v;
            }
        }
    }
}

/// Bytes that make a function's frame 64-byte aligned.
#[repr(align(64))]
struct Align64([u8; 64]);

/// The activations of `lanes8` in the order a block uses them: vector 8 chunk + 2 p + half.
#[target_feature(enable = "avx2,fma")]
fn lane_acts(a: &[u16], blocks: usize) -> Vec<__m256> {
    let mut act = Vec::with_capacity(16 * blocks);
    for chunk in 0..2 * blocks {
        // SAFETY: the caller asserted `blocks` whole blocks of activations.
        let v = unsafe {
            let at = a.as_ptr().add(64 * chunk);
            [
                bf16_pair8(at),
                bf16_pair8(at.add(16)),
                bf16_pair8(at.add(32)),
                bf16_pair8(at.add(48)),
            ]
        };
        let [[l1, l0], [h1, h0], [l3, l2], [h3, h2]] = v;
        act.extend([l0, h0, l1, h1, l2, h2, l3, h3]);
    }
    act
}

/// One block's once-folded lane vectors (lane j + lane j + 8) for four weight rows, as `lanes8` per row: each chunk's first halves (lanes 0..7) of the four rows decoded, then their FMAs product by product across the rows, then the second halves.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn block4_avx2(act: &[__m256], w: &[*const u8; 4]) -> [__m256; 4] {
    let mut lo = [_mm256_setzero_ps(); 4];
    let mut hi = [_mm256_setzero_ps(); 4];
    for chunk in 0..2 {
        let x = &act[8 * chunk..][..8];
        for (half, acc) in [&mut lo, &mut hi].into_iter().enumerate() {
            // SAFETY: the caller guarantees a whole block (128 bytes) behind every pointer.
            let wv: [[__m256; 4]; 4] =
                from_fn(|j| bytes4(unsafe { _mm256_loadu_si256(w[j].add(64 * chunk + 32 * half) as *const __m256i) }));
            for p in 0..4 {
                for (acc, wv) in acc.iter_mut().zip(&wv) {
                    *acc = _mm256_fmadd_ps(x[2 * p + half], wv[p], *acc);
                }
            }
        }
    }
    from_fn(|j| _mm256_add_ps(lo[j], hi[j]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::SimdPath;
    use crate::fp8_gemm::LAYOUT;
    use crate::fp8_gemm::x86::{RowScales, rows_avx2};
    use crate::gemm::{GROUP, PAIRS};
    use crate::rng::Rng;

    fn bytes(seed: u64, len: usize) -> Vec<u8> {
        Rng::new(seed, 0).bytes(len)
    }

    /// The GEMV entries under test.
    #[derive(Clone, Copy, Debug)]
    enum Entry {
        Avx512,
        Avx2,
        Avx2Vl,
        Bf16,
    }

    /// `entry` over columns `cols` of a random [n, k] weight, and `rows_avx2` column by column: (gemv bits, row bits).
    fn both(n: usize, k: usize, cols: Range<usize>, seed: u64, nan: bool, entry: Entry) -> (Vec<u32>, Vec<u32>) {
        let blocks = k.div_ceil(BLOCK);
        // Every finite code in the weights and (as bf16, times 2^119 as `LAYOUT` stores them) in the activations; NaN only where `nan`.
        let finite = |c: &u8| if nan || c & 0x7F != 0x7F { *c } else { c ^ 1 };
        let w: Vec<u8> = bytes(seed, n * k).iter().map(finite).collect();
        let a: Vec<u16> = bytes(seed + 1, blocks * BLOCK)
            .iter()
            .map(finite)
            .map(|c| ((tensorfold_formats::e4m3::decode(c) * LAYOUT.value_factor).to_bits() >> 16) as u16)
            .collect();
        let sa: Vec<f32> = (0..blocks).map(|b| 2f32.powi(b as i32 % 7 - 3)).collect();
        let w_scale: Vec<u8> = bytes(seed + 2, n.div_ceil(BLOCK) * blocks)
            .iter()
            .map(|&b| 120 + b % 16)
            .collect();
        let mut got = vec![0f32; cols.len()];
        // SAFETY: the caller checked the entry's features.
        unsafe {
            match entry {
                Entry::Avx512 => gemv_avx512(&a, &sa, &w, &w_scale, k, cols.clone(), &mut got),
                Entry::Avx2 => gemv_avx2(&a, &sa, &w, &w_scale, k, cols.clone(), &mut got),
                Entry::Avx2Vl => gemv_avx2_vl(&a, &sa, &w, &w_scale, k, cols.clone(), &mut got),
                Entry::Bf16 => gemv_bf16(&a, &sa, &w, &w_scale, k, cols.clone(), &mut got, false),
            }
        }
        let mut want = Vec::new();
        for c in cols {
            let mut swt = vec![0f32; blocks * GROUP];
            for kb in 0..blocks {
                swt[kb * GROUP] = e8m0::TABLE[w_scale[c / BLOCK * blocks + kb] as usize];
            }
            let scales = RowScales {
                sa: &sa,
                swt: &swt,
                off: 0,
            };
            // SAFETY: as above; the row is `k` bytes.
            let out: [f32; PAIRS] = unsafe { rows_avx2(&a, &[&w[c * k..][..k]], k, &scales) };
            want.push(out[0]);
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect();
        (bits(&got), bits(&want))
    }

    /// Every case of the GEMV tests through `entry`, against the row path.
    fn check(entry: Entry) {
        for (n, k, cols, seed) in [
            (300, 512, 0..300, 1),
            (133, 200, 5..133, 2),
            (7, 1000, 1..4, 3),
            (258, 128, 128..258, 4),
        ] {
            let (got, want) = both(n, k, cols, seed, false, entry);
            assert!(
                got.iter().all(|b| f32::from_bits(*b).is_finite()),
                "seed {seed}: finite outputs"
            );
            assert_eq!(got, want, "n={n} k={k} seed={seed} {entry:?}");
        }
        let (got, want) = both(40, 384, 0..40, 5, true, entry);
        assert!(got.iter().any(|b| f32::from_bits(*b).is_nan()));
        assert_eq!(got, want, "with NaN codes, {entry:?}");
    }

    #[test]
    fn avx512_gemv_gives_the_row_paths_bits() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")) {
            eprintln!("skipped: this CPU has no AVX-512 BW");
            return;
        }
        check(Entry::Avx512);
    }

    #[test]
    fn avx2_gemv_gives_the_row_paths_bits() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        check(Entry::Avx2);
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl") {
            check(Entry::Avx2Vl);
        }
    }

    /// Whether this CPU runs the BF16 GEMV; says so when it skips.
    fn has_bf16() -> bool {
        let has = SimdPath::available().contains(&SimdPath::Avx512Bf16);
        if !has {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
        }
        has
    }

    #[test]
    fn bf16_gemv_gives_the_row_paths_bits() {
        if !has_bf16() {
            return;
        }
        check(Entry::Bf16);
    }

    #[test]
    fn bf16_gemv_flush_control_loses_subnormal_weights() {
        if !has_bf16() {
            return;
        }
        // One column of subnormal codes (1..7) against ones: the planted table reads them as zero.
        let k = 128;
        let w: Vec<u8> = (0..k).map(|i| 1 + (i % 7) as u8).collect();
        let a = vec![(1f32.to_bits() >> 16) as u16; k];
        let (sa, w_scale) = ([1f32], [127u8]);
        let mut out = [[0f32; 1]; 2];
        for (o, flush) in out.iter_mut().zip([false, true]) {
            // SAFETY: avx512bf16 and the features it needs are present, checked above.
            unsafe { gemv_bf16(&a, &sa, &w, &w_scale, k, 0..1, o, flush) };
        }
        assert!(out[0][0] > 0.0, "subnormal weights count: {}", out[0][0]);
        assert_eq!(out[1][0], 0.0, "the planted table flushes them");
    }
}
