//! MXFP4 weights packed in 16-row groups for the CPU: one vector holds the same 32-bit word of 16 rows, so VPDPBUSD sums a block per row with no lane reduction.

use std::arch::x86_64::*;
use std::array::from_fn;

use super::cpu::{BLOCK, CHUNK, LAYOUT, one_row_path};
use super::exact::{Planes, WEIGHT_TABLE, available, planes};
use super::exact2::digits;
use super::x86::{CHUNK_BYTES, act16, plain_scales};
use crate::cpu::{CpuLaunch, SimdPath};
use crate::faults::Faults;
use crate::gemm::GROUP;
use crate::gemm::act::Fp8Rows;
use crate::gemm::groups::{AHEAD, Call, ROWS, pack_words, run_groups};
use tensorfold_formats::e2m1;

/// An MXFP4 weight [n, k] packed by groups of 16 rows: word l of chunk c of row 16g + r at word (g, c, l, r); scale codes of chunk c's four blocks as word (g, c, r).
pub struct Packed {
    pub(super) bytes: Vec<u8>,
    pub(super) codes: Vec<u8>,
    /// The smallest and largest scale code.
    pub(super) range: [u32; 2],
    pub(super) n: usize,
    pub(super) k: usize,
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed [{}, {}]", self.n, self.k)
    }
}

impl Packed {
    /// `w` [n, k/2] with scales [n, k/32] packed, where this CPU runs the packed kernel, n is a multiple of 16, k of 128 and no scale code is 0 or 255.
    pub fn new(w: &[u8], w_scale: &[u8], n: usize, k: usize) -> Option<Packed> {
        Packed::planted(w, w_scale, n, k, Faults::NONE)
    }

    /// `new`; the control `packed_row_swap` packs rows 0 and 1 of every group in each other's place.
    pub fn planted(w: &[u8], w_scale: &[u8], n: usize, k: usize, faults: Faults) -> Option<Packed> {
        if !packs() || n == 0 || !n.is_multiple_of(ROWS) || k == 0 || !k.is_multiple_of(CHUNK) {
            return None;
        }
        let (row_bytes, blocks) = (k / 2, k / BLOCK);
        assert!(
            w.len() == n * row_bytes && w_scale.len() == n * blocks,
            "packed: weight [{n}, {k}] sizes"
        );
        let bytes = pack_words(w, n, row_bytes, faults.on("packed_row_swap"));
        let mut codes = vec![0u8; w_scale.len()];
        for (g, group) in codes.chunks_exact_mut(ROWS * blocks).enumerate() {
            for (at, code) in group.iter_mut().enumerate() {
                let (c, r, b) = (at / (4 * ROWS), at / 4 % ROWS, at % 4);
                *code = w_scale[(ROWS * g + r) * blocks + 4 * c + b];
            }
        }
        // Scales are read as `code << 23`, which codes 0 (2^-127) and 255 (NaN) are not; such weights keep the row layout.
        let range = codes
            .iter()
            .fold([255, 0], |[lo, hi], &c| [lo.min(c as u32), hi.max(c as u32)]);
        (range[0] != 0 && range[1] != 255).then_some(Packed {
            bytes,
            codes,
            range,
            n,
            k,
        })
    }

    /// The packed weight bytes and scale codes.
    pub fn parts(&self) -> [&[u8]; 2] {
        [&self.bytes, &self.codes]
    }
}

/// Whether this CPU runs the packed kernel (AVX2 with FMA; AVX-512 with VBMI and VNNI runs its wider form): where it does not, `Packed::new` gives `None`.
pub fn packs() -> bool {
    available() || avx2()
}

/// Whether this CPU runs the AVX2 form.
fn avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The paths whose launches run a form of the packed kernel of their own here: the best path and, where it runs the AVX-512 form, AVX2.
pub fn packed_paths() -> Vec<SimdPath> {
    let best = SimdPath::best();
    let mut paths: Vec<SimdPath> = packs().then_some(best).into_iter().collect();
    if avx2() && wide(best) {
        paths.push(SimdPath::Avx2);
    }
    paths
}

/// Whether a call on `path` runs the AVX-512 form: every path but AVX2 where this CPU has it.
fn wide(path: SimdPath) -> bool {
    available() && path != SimdPath::Avx2
}

/// `mxfp4_gemm` against packed weights: `out[r, n]` with the same bits, threads splitting whole groups of rows; AVX2 launches (and CPUs without AVX-512 VBMI and VNNI) run the AVX2 form.
pub fn mxfp4_gemm_packed(x: &[f32], p: &Packed, out: &mut [f32], launch: &CpuLaunch, faults: Faults) {
    let (n, k) = (p.n, p.k);
    assert_eq!(x.len() % k, 0, "mxfp4_gemm: activations are not whole rows of {k}");
    let rows = x.len() / k;
    assert_eq!(out.len(), rows * n, "mxfp4_gemm: output is not [{rows}, {n}]");
    let path = match rows {
        1 => one_row_path(launch),
        _ => launch.simd,
    };
    // SAFETY: `wide` holds only where `available` does; a `Packed` exists only where `packs` holds, so AVX2 and FMA run where `available` does not.
    unsafe {
        match wide(path) {
            true => run_form(x, p, out, launch, faults, planes, group_into),
            false => run_form(x, p, out, launch, faults, digits, super::packed2::form()),
        }
    }
}

/// A form's group kernel: group `g`'s 16 outputs against one row's activations, scales and prepared state.
pub(super) type GroupFn<S> = unsafe fn(&[u16], &[f32], &S, &Packed, usize, &mut [f32]);

/// `mxfp4_gemm_packed` through one form: `prepare` makes each activation row's state, `group` the outputs; the caller's CPU runs both.
unsafe fn run_form<S: Sync>(
    x: &[f32],
    p: &Packed,
    out: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
    prepare: unsafe fn(&[u16], usize) -> S,
    group: GroupFn<S>,
) {
    let (n, k, rows, chunks) = (p.n, p.k, x.len() / p.k, p.k / CHUNK);
    let prep = || {
        let act = Fp8Rows::quantise(x, k, LAYOUT);
        // SAFETY: the caller's CPU runs `prepare`; every row holds whole chunks.
        let state: Vec<S> = (0..rows).map(|r| unsafe { prepare(act.row(r), chunks) }).collect();
        (act, state)
    };
    let ones = vec![1f32; chunks];
    let lost_act_scale = faults.on("lost_act_scale");
    let call = Call {
        work: rows * n * (k / BLOCK) * 8,
        faults,
    };
    run_groups(rows, n, out, launch, call, prep, |(act, state), r, g, dst| {
        let sa = if lost_act_scale { &ones[..] } else { act.row_scales(r) };
        // SAFETY: as above; group g lies inside the weight, the activations hold whole chunks.
        unsafe { group(act.row(r), sa, &state[r], p, g, dst) };
    });
}

/// The 16 outputs of group `g` into `dst`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
unsafe fn group_into(a: &[u16], sa: &[f32], planes: &Planes, p: &Packed, g: usize, dst: &mut [f32]) {
    let chunks = p.k / CHUNK;
    assert!(sa.len() >= chunks && a.len() >= p.k && (g + 1) * ROWS <= p.n && dst.len() == ROWS);
    let (w, codes) = (&p.bytes[g * ROWS * p.k / 2..], &p.codes[g * ROWS * p.k / BLOCK..]);
    // SAFETY: the group's bytes and codes lie inside the weight (asserted above).
    let v = unsafe { group(a, sa, planes, w.as_ptr(), codes.as_ptr(), chunks, p.range) };
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), v) };
}

/// The 16 outputs of one group: block by block `acc = fma(inner, sa * sw, acc)`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
unsafe fn group(
    a: &[u16],
    sa: &[f32],
    planes: &Planes,
    w: *const u8,
    codes: *const u8,
    chunks: usize,
    range: [u32; 2],
) -> __m512 {
    // SAFETY: 64 bytes; 16 floats.
    let (tw, t) = unsafe {
        (
            _mm512_loadu_si512(WEIGHT_TABLE.as_ptr() as *const __m512i),
            _mm512_loadu_ps(e2m1::TABLE.as_ptr()),
        )
    };
    let mut acc = _mm512_setzero_ps();
    for (c, &sa) in sa.iter().enumerate().take(chunks) {
        // SAFETY: chunk c of the group: 16 vectors of 64 bytes.
        let base = unsafe { w.add(c * GROUP * CHUNK_BYTES) };
        let mut inner = [_mm512_setzero_ps(); 4];
        // Loops and functions, not closures: a closure's body may be left out of line, without this function's features.
        if planes.exact[c] {
            let pc = &planes.chunks[c];
            if planes.two[c] {
                for (b, inner) in inner.iter_mut().enumerate() {
                    // SAFETY: the block's four words lie in the chunk.
                    *inner = _mm512_cvtepi32_ps(unsafe { two_digit_block(pc, b, planes.starts[c][b], base, tw) });
                }
            } else {
                for (b, inner) in inner.iter_mut().enumerate() {
                    let mut l = [_mm512_setzero_ps(); 4];
                    for (i, l) in l.iter_mut().enumerate() {
                        // SAFETY: as above.
                        let d = unsafe { word(base, 4 * b + i) };
                        *l = _mm512_cvtepi32_ps(three_digit_lane(pc, 4 * b + i, d, tw));
                    }
                    *inner = _mm512_add_ps(_mm512_add_ps(l[0], l[2]), _mm512_add_ps(l[1], l[3]));
                }
            }
        } else {
            // SAFETY: chunk c lies inside the activation row (asserted by the caller).
            let av = unsafe { act16(a.as_ptr().add(c * CHUNK)) };
            let mut x = [[0f32; 16]; 8];
            for (x, v) in x.iter_mut().zip(av) {
                // SAFETY: 16 floats.
                unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) };
            }
            for (b, inner) in inner.iter_mut().enumerate() {
                let mut l = [_mm512_setzero_ps(); 4];
                for (i, l) in l.iter_mut().enumerate() {
                    // SAFETY: as above.
                    let d = unsafe { word(base, 4 * b + i) };
                    *l = fma_lane(&x, 4 * b + i, d, t);
                }
                *inner = _mm512_add_ps(_mm512_add_ps(l[0], l[2]), _mm512_add_ps(l[1], l[3]));
            }
        }
        // SAFETY: 64 bytes of codes a chunk.
        let cw = unsafe { _mm512_loadu_si512(codes.add(c * 64) as *const __m512i) };
        let sw = plain_scales(cw);
        // An exact chunk's inner sums count units of `units[c]`, which the scale takes on.
        let unit = if planes.exact[c] { planes.units[c] } else { 1.0 };
        match folded_scale(sa, unit, range) {
            Some(base) => {
                let base = _mm512_set1_epi32(base);
                for (inner, sw) in inner.iter().zip(sw) {
                    let scale = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(sw), base));
                    acc = _mm512_fmadd_ps(*inner, scale, acc);
                }
            }
            None => {
                let (s, unit) = (_mm512_set1_ps(sa), _mm512_set1_ps(unit));
                for (inner, sw) in inner.iter().zip(sw) {
                    acc = _mm512_fmadd_ps(_mm512_mul_ps(*inner, unit), _mm512_mul_ps(s, sw), acc);
                }
            }
        }
    }
    acc
}

/// What to add to `code << 23` for the bits of `sa * 2^(code - 127) * unit`, where `sa * 2^(code - 127)` and that product are normal for every code in `range` (both exact, so `fma(inner, sa * sw * unit, acc)` is `fma(inner * unit, sa * sw, acc)`).
pub(super) fn folded_scale(sa: f32, unit: f32, range: [u32; 2]) -> Option<i32> {
    let (e_sa, e_unit) = (sa.to_bits() >> 23 & 0xFF, unit.to_bits() >> 23);
    // unit is a positive power of two at most 1: sa * sw * unit is at most sa * sw.
    let normal = (1..=254).contains(&e_sa) && range[0] + e_sa + e_unit >= 255 && range[1] + e_sa <= 381;
    normal.then(|| sa.to_bits().wrapping_add(unit.to_bits()).wrapping_sub(254 << 23) as i32)
}

/// Word l of a chunk's 16 rows at `base`, the lines `AHEAD` bytes on asked of L1 and L2.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn word(base: *const u8, l: usize) -> __m512i {
    // A prefetch never faults.
    _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(64 * l + AHEAD.0) as *const i8);
    _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(64 * l + AHEAD.1) as *const i8);
    // SAFETY: the caller's chunk holds word l of 16 rows.
    unsafe { _mm512_loadu_si512(base.add(64 * l) as *const __m512i) }
}

/// Block b's exact integer sum per row over its four words, digits 0 and 1; digit 0's chain starts at `start`, the block's -12 * sum A.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
unsafe fn two_digit_block(
    pc: &super::exact::ChunkPlanes,
    b: usize,
    start: i32,
    base: *const u8,
    tw: __m512i,
) -> __m512i {
    let mut t0 = [_mm512_set1_epi32(start), _mm512_setzero_si512()];
    let mut t1 = [_mm512_setzero_si512(); 2];
    for l in 4 * b..4 * b + 4 {
        // SAFETY: the caller's chunk holds the block's words.
        let d = unsafe { word(base, l) };
        let w = [
            _mm512_permutexvar_epi8(d, tw),
            _mm512_permutexvar_epi8(_mm512_srli_epi16::<4>(d), tw),
        ];
        for h in 0..2 {
            t0[h] = _mm512_dpbusd_epi32(t0[h], w[h], _mm512_set1_epi32(pc.word(h, l)));
            t1[h] = _mm512_dpbusd_epi32(t1[h], w[h], _mm512_set1_epi32(pc.word(2 + h, l)));
        }
    }
    _mm512_add_epi32(
        _mm512_add_epi32(t0[0], t0[1]),
        _mm512_slli_epi32::<8>(_mm512_add_epi32(t1[0], t1[1])),
    )
}

/// Lane l's exact integer sum per row over three digits.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
fn three_digit_lane(pc: &super::exact::ChunkPlanes, l: usize, d: __m512i, tw: __m512i) -> __m512i {
    let w = [
        _mm512_permutexvar_epi8(d, tw),
        _mm512_permutexvar_epi8(_mm512_srli_epi16::<4>(d), tw),
    ];
    let t: [__m512i; 3] = from_fn(|p| {
        let start = match p {
            0 => _mm512_set1_epi32(pc.init[l]),
            _ => _mm512_setzero_si512(),
        };
        let s = _mm512_dpbusd_epi32(start, w[0], _mm512_set1_epi32(pc.word(2 * p, l)));
        _mm512_dpbusd_epi32(s, w[1], _mm512_set1_epi32(pc.word(2 * p + 1, l)))
    });
    _mm512_add_epi32(
        _mm512_add_epi32(t[0], _mm512_slli_epi32::<8>(t[1])),
        _mm512_slli_epi32::<16>(t[2]),
    )
}

/// Lane l per row by FMA in element order, as `group_fma`.
#[inline]
#[target_feature(enable = "avx512f")]
fn fma_lane(x: &[[f32; 16]; 8], l: usize, d: __m512i, t: __m512) -> __m512 {
    let mut acc = _mm512_setzero_ps();
    for (q, x) in x.iter().enumerate() {
        let idx = _mm512_srlv_epi32(d, _mm512_set1_epi32(4 * q as i32));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(x[l]), _mm512_permutexvar_ps(idx, t), acc);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::rng::Rng;
    use crate::cpu::SimdPath;
    use crate::gemm::reference::{activations, scale_codes_within};
    use crate::mxfp4_gemm::mxfp4_gemm;

    /// Inputs of `rows` x [n, k]: activations as the contract draws them (value 200 of each row NaN where `nan`), random codes, scales across +-`spread` binades.
    fn inputs(rows: usize, n: usize, k: usize, seed: u64, spread: u64, nan: bool) -> (Vec<f32>, Vec<u8>, Vec<u8>) {
        let mut rng = Rng::new(seed, 0);
        let mut x = activations(&mut rng, rows, k);
        if nan {
            x.iter_mut().skip(200).step_by(k).for_each(|v| *v = f32::NAN);
        }
        let w: Vec<u8> = (0..n * k / 2).map(|_| rng.below(256) as u8).collect();
        let s = scale_codes_within(&mut rng, n * k / BLOCK, -8, spread);
        (x, w, s)
    }

    /// Bits of `mxfp4_gemm` on the row layout and on the packed one, under `launch`.
    fn both(x: &[f32], w: &[u8], s: &[u8], n: usize, k: usize, launch: &CpuLaunch) -> (Vec<u32>, Vec<u32>) {
        let rows = x.len() / k;
        let p = Packed::new(w, s, n, k).expect("a packable shape");
        let (mut got, mut want) = (vec![f32::NAN; rows * n], vec![f32::NAN; rows * n]);
        mxfp4_gemm_packed(x, &p, &mut got, launch, Faults::NONE);
        mxfp4_gemm(x, w, s, n, k, &mut want, launch, Faults::NONE);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect();
        (bits(&got), bits(&want))
    }

    #[test]
    fn packed_weights_give_the_row_layouts_bits() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX-512 VBMI or VNNI, which the packed kernel needs");
            return;
        }
        let launches = [
            CpuLaunch::serial().only(SimdPath::Avx512),
            CpuLaunch {
                threads: 2,
                tile_rows: 1,
                ..CpuLaunch::serial()
            },
        ];
        // (rows, n, k, spread, nan): one row and several; scales across 22 binades; a NaN activation.
        let cases = [
            (1, 48, 1024, 3, false),
            (5, 32, 384, 3, false),
            (1, 64, 256, 11, false),
            (3, 16, 512, 2, true),
        ];
        for (seed, &(rows, n, k, spread, nan)) in cases.iter().enumerate() {
            let (x, w, s) = inputs(rows, n, k, seed as u64 + 1, spread, nan);
            for launch in &launches {
                let (got, want) = both(&x, &w, &s, n, k, launch);
                assert_eq!(got, want, "rows {rows} [{n}, {k}] spread {spread} nan {nan}, {launch}");
            }
        }
    }

    #[test]
    fn packed_weights_take_every_lane_path() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX-512 VBMI or VNNI, which the packed kernel needs");
            return;
        }
        let k = 1024;
        let (x, w, s) = inputs(1, 16, k, 9, 3, true);
        let act = Fp8Rows::quantise(&x, k, LAYOUT);
        // SAFETY: checked available above.
        let p = unsafe { planes(act.row(0), k / CHUNK) };
        let two = (0..k / CHUNK).filter(|&c| p.exact[c] && p.two[c]).count();
        let three = (0..k / CHUNK).filter(|&c| p.exact[c] && !p.two[c]).count();
        assert!(
            two > 0 && three > 0 && p.exact_chunks() < k / CHUNK,
            "two {two}, three {three}, exact {}",
            p.exact_chunks()
        );
        let (got, want) = both(&x, &w, &s, 16, k, &CpuLaunch::serial());
        assert_eq!(got, want);
    }

    #[test]
    fn activations_off_the_e4m3_grid_take_the_fma_lanes() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX-512 VBMI or VNNI, which the packed kernel needs");
            return;
        }
        use crate::gemm::PAIRS;
        use crate::mxfp4_gemm::testdata::layout;
        use crate::mxfp4_gemm::x86::rows_avx512;
        let k = 512;
        let mut rng = Rng::new(4, 0);
        // bf16 values of 8 significant bits over 24 binades: not e4m3 values (no chunk is exact), and sums that round.
        let values: Vec<f32> = (0..k)
            .map(|_| 1.0078125 * rng.normal() * 2f32.powi(rng.below(24) as i32 - 12))
            .collect();
        let a = layout(&values);
        let (w, s) = (
            (0..ROWS * k / 2).map(|_| rng.below(256) as u8).collect::<Vec<u8>>(),
            scale_codes_within(&mut rng, ROWS * k / BLOCK, -2, 3),
        );
        let sa: Vec<f32> = (0..k / CHUNK).map(|c| 0.75 * (c + 1) as f32).collect();
        let p = Packed::new(&w, &s, ROWS, k).expect("one group");
        let mut got = [0f32; ROWS];
        // SAFETY: checked available above.
        let pl = unsafe { planes(&a, k / CHUNK) };
        assert_eq!(pl.exact_chunks(), 0, "every chunk off the grid");
        unsafe { group_into(&a, &sa, &pl, &p, 0, &mut got) };
        let swt: Vec<f32> = (0..k / BLOCK * GROUP)
            .map(|i| tensorfold_formats::e8m0::TABLE[s[(i % GROUP) * (k / BLOCK) + i / GROUP] as usize])
            .collect();
        let rows: Vec<&[u8]> = w.chunks(k / 2).collect();
        // SAFETY: as above; rows of k/2 bytes, activations whole chunks.
        let want: [f32; PAIRS] = unsafe { rows_avx512(&a, &sa, &swt, 0, PAIRS, &|j| rows[j], k, None) };
        assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits));
    }

    #[test]
    fn folded_scales_are_the_multiplied_scales_where_both_are_normal() {
        let mut rng = Rng::new(6, 0);
        let (mut folded, mut refused) = (0, 0);
        for i in 0..20000 {
            // Activation scales across every binade, units of the exact paths and 1, every code.
            let sa = f32::from_bits(rng.next_u64() as u32 & 0x7FFF_FFFF);
            let unit = if i % 5 == 4 { 1.0 } else { 2f32.powi(i % 5 - 10) };
            let code = 1 + rng.below(254) as u32;
            let (sw, product) = (f32::from_bits(code << 23), sa * f32::from_bits(code << 23));
            let exact = sa.is_normal() && product.is_normal() && (product * unit).is_normal();
            match folded_scale(sa, unit, [code, code]) {
                Some(base) => {
                    folded += 1;
                    assert!(exact, "sa {sa:e} unit {unit:e} code {code}");
                    assert_eq!((code << 23).wrapping_add(base as u32), (sa * sw * unit).to_bits());
                }
                None => {
                    refused += 1;
                    assert!(!exact, "sa {sa:e} unit {unit:e} code {code} refused");
                }
            }
        }
        assert!(folded > 1000 && refused > 1000, "folded {folded}, refused {refused}");
    }

    #[test]
    fn tiny_weight_scales_keep_the_multiplied_products() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX-512 VBMI or VNNI, which the packed kernel needs");
            return;
        }
        let (rows, n, k) = (2, 32, 512);
        let mut rng = Rng::new(12, 0);
        let x = activations(&mut rng, rows, k);
        let w: Vec<u8> = (0..n * k / 2).map(|_| rng.below(256) as u8).collect();
        // Codes 2^-123 to 2^-113: some products of activation and weight scale are subnormal, which a folded scale would not round.
        let s = scale_codes_within(&mut rng, n * k / BLOCK, -118, 5);
        let act = Fp8Rows::quantise(&x, k, LAYOUT);
        let p = Packed::new(&w, &s, n, k).expect("a packable shape");
        let refused = (0..rows)
            .flat_map(|r| act.row_scales(r).to_vec())
            .filter(|&sa| folded_scale(sa, 2f32.powi(-7), p.range).is_none());
        assert!(refused.count() > 0, "some chunk takes the multiplied scales");
        for launch in [
            CpuLaunch::serial(),
            CpuLaunch {
                threads: 2,
                ..CpuLaunch::serial()
            },
        ] {
            let (got, want) = both(&x, &w, &s, n, k, &launch);
            assert_eq!(got, want, "{launch}");
        }
    }

    #[test]
    fn unpackable_shapes_are_refused() {
        let (w, s) = (vec![0u8; 24 * 128 / 2], vec![127u8; 24 * 128 / BLOCK]);
        assert!(Packed::new(&w, &s, 24, 128).is_none(), "24 rows are not whole groups");
        let (w, s) = (vec![0u8; 16 * 96 / 2], vec![127u8; 16 * 96 / BLOCK]);
        assert!(Packed::new(&w, &s, 16, 96).is_none(), "96 values are not whole chunks");
        if available() {
            let w = vec![0u8; 16 * 128 / 2];
            for edge in [0, 255] {
                let mut s = vec![127u8; 16 * 128 / BLOCK];
                s[37] = edge;
                assert!(
                    Packed::new(&w, &s, 16, 128).is_none(),
                    "scale code {edge} keeps the row layout"
                );
            }
            assert!(Packed::new(&w, &[127u8; 64], 16, 128).is_some());
        }
    }
}
