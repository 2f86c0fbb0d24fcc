//! FP8 weights packed in 16-row groups for the CPU: VDPBF16PS keeps row r in lane r, so a block's 16 lanes reduce by vertical adds in the tree's order.

use std::arch::x86_64::*;
use std::mem::transmute;

use tensorfold_formats::e8m0;

use super::bf16::{Tables, UNDO};
use super::cpu::{BLOCK, LAYOUT};
use crate::cpu::{CpuLaunch, SimdPath};
use crate::faults::Faults;
use crate::gemm::act::Fp8Rows;
use crate::gemm::groups::{AHEAD, Call, ROWS, pack_words, run_groups};

/// An FP8 weight [n, k] packed by groups of 16 rows (word l of 64-byte chunk c of row 16g + r at word (g, c, l, r)), with its scale grid.
pub struct Packed {
    bytes: Vec<u8>,
    scales: Vec<u8>,
    n: usize,
    k: usize,
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed [{}, {}]", self.n, self.k)
    }
}

impl Packed {
    /// `w` [n, k] with scales [ceil(n/128), k/128] packed, where this CPU runs the packed kernel, n is a multiple of 16 and k of 128.
    pub fn new(w: &[u8], w_scale: &[u8], n: usize, k: usize) -> Option<Packed> {
        Packed::planted(w, w_scale, n, k, Faults::NONE)
    }

    /// `new`; the control `packed_row_swap` packs rows 0 and 1 of every group in each other's place.
    pub fn planted(w: &[u8], w_scale: &[u8], n: usize, k: usize, faults: Faults) -> Option<Packed> {
        if !packs() || n == 0 || !n.is_multiple_of(ROWS) || k == 0 || !k.is_multiple_of(BLOCK) {
            return None;
        }
        assert!(
            w.len() == n * k && w_scale.len() == n.div_ceil(BLOCK) * (k / BLOCK),
            "packed: weight [{n}, {k}] sizes"
        );
        let mut bytes = pack_words(w, n, k, faults.on("packed_row_swap"));
        for v in bytes.chunks_exact_mut(64) {
            *<&mut [u8; 64]>::try_from(v).expect("64 bytes") = unpack_order(v);
        }
        Some(Packed {
            bytes,
            scales: w_scale.to_vec(),
            n,
            k,
        })
    }

    /// The packed weight bytes and the scale grid.
    pub fn parts(&self) -> [&[u8]; 2] {
        [&self.bytes, &self.scales]
    }
}

/// A vector of 16 rows' words (row r's codes c0..c3 at bytes 4r..4r + 3) in the order `decode` unpacks: in 128-bit lane q, row 4q + d's c1, c0 at bytes 2d, 2d + 1 and c3, c2 at bytes 8 + 2d, 9 + 2d.
fn unpack_order(v: &[u8]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for r in 0..ROWS {
        let (q, d) = (r / 4, r % 4);
        let c = &v[4 * r..][..4];
        let lane = &mut out[16 * q..][..16];
        (lane[2 * d], lane[2 * d + 1], lane[8 + 2 * d], lane[9 + 2 * d]) = (c[1], c[0], c[3], c[2]);
    }
    out
}

/// 64 codes in `unpack_order` as two bf16 vectors: dword r of the first holds row r's codes (c0 high half, c1 low), of the second (c2, c3).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn decode(d: __m512i, t: &Tables) -> [__m512i; 2] {
    let lo = _mm512_permutex2var_epi8(t.lo[0], d, t.lo[1]);
    let hi = _mm512_permutex2var_epi8(t.hi[0], d, t.hi[1]);
    // hi | (d & sign): the code's sign is the bf16's.
    let hi = _mm512_ternarylogic_epi32::<0xF8>(hi, d, t.sign);
    [_mm512_unpacklo_epi8(lo, hi), _mm512_unpackhi_epi8(lo, hi)]
}

/// Whether this CPU runs the packed kernel (AVX-512 with VBMI and BF16): where it does not, `Packed::new` gives `None`.
pub fn packs() -> bool {
    SimdPath::available().contains(&SimdPath::Avx512Bf16) && is_x86_feature_detected!("avx512vbmi")
}

/// `fp8_gemm` against packed weights: `out[r, n]` with the same bits, threads splitting whole groups of rows.
pub fn fp8_gemm_packed(x: &[f32], p: &Packed, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    let (n, k) = (p.n, p.k);
    assert_eq!(x.len() % k, 0, "fp8_gemm: activations are not whole rows of {k}");
    let rows = x.len() / k;
    assert_eq!(out.len(), rows * n, "fp8_gemm: output is not [{rows}, {n}]");
    let ones = vec![1f32; k / BLOCK];
    let lost_act_scale = faults.on("lost_act_scale");
    let flush = faults.on("bf16_subnormal_flush");
    let call = Call {
        work: rows * n * k / 16,
        faults,
    };
    let prep = || Fp8Rows::quantise(x, k, LAYOUT);
    run_groups(rows, n, out, launch, call, prep, |act, r, g, dst| {
        let sa = if lost_act_scale { &ones[..] } else { act.row_scales(r) };
        // SAFETY: a `Packed` exists only where `packs` holds; group g lies inside the weight.
        unsafe { group_into(act.row(r), sa, p, g, flush, dst) };
    });
}

/// The 16 outputs of group `g` into `dst`: block by block `acc = fma(inner / 8, sa * sw, acc)`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
unsafe fn group_into(a: &[u16], sa: &[f32], p: &Packed, g: usize, flush: bool, dst: &mut [f32]) {
    let blocks = p.k / BLOCK;
    assert!(sa.len() >= blocks && a.len() >= p.k && (g + 1) * ROWS <= p.n && dst.len() == ROWS);
    let t = Tables::new(flush);
    let w = &p.bytes[g * ROWS * p.k..];
    let sw = &p.scales[g * ROWS / BLOCK * blocks..][..blocks];
    let mut acc = _mm512_setzero_ps();
    for (kb, (&sa, &sw)) in sa.iter().zip(sw).enumerate() {
        // SAFETY: block kb of the group's weights and of the activations lies inside them (asserted above).
        let inner = unsafe { block(a.as_ptr().add(kb * BLOCK), w.as_ptr().add(kb * ROWS * BLOCK), &t) };
        let s = _mm512_set1_ps(sa * e8m0::TABLE[sw as usize]);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(inner, _mm512_set1_ps(UNDO)), s, acc);
    }
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), acc) };
}

/// One block's inner per row (8 times the f32 paths'): lane l of every row by VDPBF16PS as `block_lanes`, then the tree (j, j+8), (j, j+4), (j, j+2), (0, 1).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
unsafe fn block(a: *const u16, w: *const u8, t: &Tables) -> __m512 {
    let mut l = [_mm512_setzero_ps(); 16];
    for chunk in 0..2 {
        // SAFETY: the caller's block holds two chunks of 16 words of 16 rows, and 128 activations.
        let (base, at) = unsafe { (w.add(chunk * ROWS * 64), a.add(64 * chunk)) };
        // Written out lane by lane, so the 16 sums stay in registers.
        macro_rules! lanes {
            ($($i:literal)*) => {
                // SAFETY: as above.
                $(l[$i] = unsafe { lane(l[$i], base, at, $i, t) };)*
            };
        }
        lanes!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    }
    let e: [__m512; 8] = std::array::from_fn(|j| _mm512_add_ps(l[j], l[j + 8]));
    let f: [__m512; 4] = std::array::from_fn(|j| _mm512_add_ps(e[j], e[j + 4]));
    let h = [_mm512_add_ps(f[0], f[2]), _mm512_add_ps(f[1], f[3])];
    _mm512_add_ps(h[0], h[1])
}

/// Lane `i` of one 64-byte chunk: word i of 16 rows at `base` against activation words 2i, 2i + 1 and 32 + 2i, 33 + 2i at `at`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bf16")]
unsafe fn lane(acc: __m512, base: *const u8, at: *const u16, i: usize, t: &Tables) -> __m512 {
    // SAFETY: the caller's chunk holds word i of 16 rows and 64 activations; a prefetch never faults.
    let (d, a0, a1) = unsafe {
        _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(64 * i + AHEAD.0) as *const i8);
        _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(64 * i + AHEAD.1) as *const i8);
        (
            _mm512_loadu_si512(base.add(64 * i) as *const __m512i),
            (at.add(2 * i) as *const i32).read_unaligned(),
            (at.add(32 + 2 * i) as *const i32).read_unaligned(),
        )
    };
    let [w0, w1] = decode(d, t);
    // SAFETY: same-sized vector types; the bits are bf16 pairs.
    let bh = |v: __m512i| unsafe { transmute::<__m512i, __m512bh>(v) };
    let acc = _mm512_dpbf16_ps(acc, bh(_mm512_set1_epi32(a0)), bh(w0));
    _mm512_dpbf16_ps(acc, bh(_mm512_set1_epi32(a1)), bh(w1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::rng::Rng;
    use crate::fp8_gemm::fp8_gemm;
    use crate::gemm::reference::{activations, fp8_codes, scale_codes};

    /// Bits of `fp8_gemm` on the row layout and on the packed one, under `launch`.
    fn both(rows: usize, n: usize, k: usize, seed: u64, nan: bool, launch: &CpuLaunch) -> (Vec<u32>, Vec<u32>) {
        let mut rng = Rng::new(seed, 0);
        let x = activations(&mut rng, rows, k);
        let mut w = fp8_codes(&mut rng, n * k);
        if nan {
            w[3 * k + 77] = 0x7F;
        }
        let s = scale_codes(&mut rng, n.div_ceil(BLOCK) * (k / BLOCK), -12);
        let p = Packed::new(&w, &s, n, k).expect("a packable shape");
        let (mut got, mut want) = (vec![f32::NAN; rows * n], vec![f32::NAN; rows * n]);
        fp8_gemm_packed(&x, &p, &mut got, launch, Faults::NONE);
        fp8_gemm(&x, &w, &s, n, k, &mut want, launch, Faults::NONE);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect();
        (bits(&got), bits(&want))
    }

    #[test]
    fn packed_weights_give_the_row_layouts_bits() {
        if !packs() {
            eprintln!("skipped: this CPU lacks AVX-512 BF16 or VBMI, which the packed kernel needs");
            return;
        }
        let launches = [
            CpuLaunch::serial(),
            CpuLaunch::serial().only(SimdPath::Avx512),
            CpuLaunch {
                threads: 2,
                tile_rows: 1,
                ..CpuLaunch::serial()
            },
        ];
        // (rows, n, k, nan): one row (three and five groups) and several, rows across two scale rows, the NaN weight code.
        for (seed, &(rows, n, k, nan)) in [
            (1, 48, 1024, false),
            (1, 80, 256, true),
            (5, 160, 384, false),
            (3, 32, 256, true),
        ]
        .iter()
        .enumerate()
        {
            for launch in &launches {
                let (got, want) = both(rows, n, k, seed as u64 + 1, nan, launch);
                assert!(
                    got.iter().all(|&b| f32::from_bits(b).is_finite()),
                    "finite (the NaN code reads as 480)"
                );
                assert_eq!(got, want, "rows {rows} [{n}, {k}], {launch}");
            }
        }
    }

    #[test]
    fn unpackable_shapes_are_refused() {
        assert!(
            Packed::new(&[0; 24 * 128], &[127], 24, 128).is_none(),
            "24 rows are not whole groups"
        );
        assert!(
            Packed::new(&[0; 16 * 192], &[127; 2], 16, 192).is_none(),
            "192 values are not whole blocks"
        );
    }
}
