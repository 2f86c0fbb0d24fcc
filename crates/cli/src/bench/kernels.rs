//! `tensorfold bench kernels`: GEMV and GEMM speed on V4-Flash shapes beside this machine's measured read bandwidth.

use std::rc::Rc;
use std::time::Instant;

use clap::Args;
use serde_json::json;
use tensorfold_formats::e4m3;
use tensorfold_kernels::Faults;
use tensorfold_kernels::bf16_gemm::bf16_gemm;
use tensorfold_kernels::cpu::{CpuLaunch, SimdPath, par_chunks_mut};
use tensorfold_kernels::dequant_gemm::{WeightFormat, dequant_gemm};
use tensorfold_kernels::fp8_gemm::{self, fp8_gemm};
use tensorfold_kernels::grouped_proj::grouped_proj;
use tensorfold_kernels::mxfp4_gemm::{self, mxfp4_gemm};

#[derive(Args)]
pub struct KernelsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Seconds of calls per measurement.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Only benchmarks whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Cycle each benchmark's weights through copies of at least this many MiB (far above the caches by default).
    #[arg(long, default_value_t = 256)]
    working_set_mib: usize,
    /// FP8 and MXFP4 weights, and the read-bandwidth buffer, in anonymous memory advised MADV_HUGEPAGE (2 MB pages, as the engine's checkpoint mappings are advised) instead of the heap's 4 KB pages.
    #[arg(long)]
    huge_pages: bool,
    /// SIMD path of every kernel, one-row GEMVs included: portable, avx2, avx512 or avx512bf16 (default: the fastest this CPU runs, with its GEMV default); packed rows have forms of their own: FP8 only AVX-512 BF16, MXFP4 AVX2 and, for any other path, its widest.
    #[arg(long, value_parser = simd_path)]
    simd: Option<SimdPath>,
    /// MiB the read-bandwidth yardstick sums, at the start, before, among and after each row's calls, and at the end.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65536))]
    read_mib: u64,
}

/// Yardstick passes spread through a row's calls (one more before them and one after).
const YARDSTICK_PASSES: f64 = 6.0;

/// Distinct experts an MXFP4 benchmark cycles through.
const MIN_EXPERTS: usize = 64;

/// One measured benchmark.
struct Row {
    name: String,
    shape: String,
    rows: usize,
    threads: usize,
    ms: f64,
    weight_gbs: f64,
    best_gbs: f64,
    gflops: f64,
    /// Median GB/s of another copy of the weights summed on the same threads, between the calls.
    paired_gbs: f64,
    /// Median GB/s of the read-bandwidth passes before, among and after the calls.
    read_gbs: f64,
}

/// One call of a benchmark on copy `i` of its weights.
type Call<'a> = Box<dyn FnMut(usize, &CpuLaunch) + 'a>;

/// Sums copy `i`'s weight bytes on `threads` pool threads (the paired read).
type Read<'a> = Box<dyn Fn(usize, usize) -> u64 + 'a>;

/// A benchmark: its weight bytes per call, FLOPs per call, and a call on copy `i` of its weights.
struct Bench<'a> {
    name: &'static str,
    shape: String,
    rows: usize,
    bytes: usize,
    flops: f64,
    copies: usize,
    call: Call<'a>,
    read: Read<'a>,
}

pub fn run(args: KernelsArgs) -> anyhow::Result<()> {
    let simd = args.simd.unwrap_or_else(SimdPath::best);
    let gemv_simd = args.simd.map_or_else(SimdPath::gemv_default, |_| None);
    let one_row = CpuLaunch {
        gemv_simd,
        ..CpuLaunch::serial().only(simd)
    };
    let (fp8_gemv, mxfp4_gemv) = (fp8_gemm::one_row_path(&one_row), mxfp4_gemm::one_row_path(&one_row));
    let paths = match gemv_simd {
        Some(g) => {
            let own: Vec<String> = [("FP8", fp8_gemv), ("MXFP4", mxfp4_gemv)]
                .iter()
                .filter(|(_, p)| *p != g)
                .map(|(name, p)| format!(", {name}'s {p}"))
                .collect();
            format!("{simd} (one-row GEMVs {g}{})", own.concat())
        }
        None => simd.to_string(),
    };
    let read_bytes = (args.read_mib as usize) << 20;
    let yardstick = ReadBuffer::new(read_bytes, args.huge_pages);
    let read_before = yardstick.best(2);
    let mut rows = Vec::new();
    // The most anonymous memory in huge pages while any benchmark's weights were held.
    let mut huge = 0;
    for spec in specs() {
        if args.only.as_deref().is_some_and(|o| !spec.0.contains(o)) {
            continue;
        }
        let working_set = if spec.0.contains("cached") {
            0
        } else {
            args.working_set_mib << 20
        };
        let mut bench = build(spec, working_set, args.huge_pages);
        huge = huge.max(huge_page_mib());
        for threads in [1, 2] {
            let launch = CpuLaunch {
                threads,
                simd,
                tile_rows: usize::MAX,
                split_min: 0,
                gemv_simd,
                packed: false,
            };
            let copies = bench.copies;
            let mut passes = vec![yardstick.pass(2)];
            (bench.call)(0, &launch);
            let (mut times, mut reads) = (Vec::new(), Vec::new());
            let start = Instant::now();
            // Seconds spent in yardstick passes, which do not count against the row's calls.
            let mut in_passes = 0.0;
            loop {
                let busy = start.elapsed().as_secs_f64() - in_passes;
                if times.len() >= 5 && busy >= args.seconds {
                    break;
                }
                // A yardstick pass every sixth of the row's time, so the calls and the read sample the same moments.
                if busy >= (passes.len() as f64 - 0.5) * args.seconds / YARDSTICK_PASSES {
                    let t = Instant::now();
                    passes.push(yardstick.pass(2));
                    in_passes += t.elapsed().as_secs_f64();
                }
                let i = times.len() % copies;
                let t = Instant::now();
                (bench.call)(i, &launch);
                times.push(t.elapsed().as_secs_f64());
                // The copy farthest from the ones just called, so the read finds it no nearer the core than the call did.
                let t = Instant::now();
                std::hint::black_box((bench.read)((i + copies / 2) % copies, threads));
                reads.push(t.elapsed().as_secs_f64());
            }
            passes.push(yardstick.pass(2));
            passes.sort_by(f64::total_cmp);
            // The same statistic as the calls' figure, so the machine's moment-to-moment noise favours neither.
            let read_gbs = (passes[(passes.len() - 1) / 2] + passes[passes.len() / 2]) / 2.0;
            times.sort_by(f64::total_cmp);
            reads.sort_by(f64::total_cmp);
            let (secs, best) = (times[times.len() / 2], times[0]);
            rows.push(Row {
                name: bench.name.to_string(),
                shape: bench.shape.clone(),
                rows: bench.rows,
                threads,
                ms: secs * 1e3,
                weight_gbs: bench.bytes as f64 / secs / 1e9,
                best_gbs: bench.bytes as f64 / best / 1e9,
                gflops: bench.flops / secs / 1e9,
                paired_gbs: bench.bytes as f64 / reads[reads.len() / 2] / 1e9,
                read_gbs,
            });
        }
    }
    let read_after = yardstick.best(2);
    let read_gbs = read_before.max(read_after);
    if args.json {
        let results: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({ "name": r.name, "shape": r.shape, "rows": r.rows, "threads": r.threads, "ms": r.ms,
                        "weight_gb_per_s": r.weight_gbs, "best_weight_gb_per_s": r.best_gbs, "gflop_per_s": r.gflops,
                        "read_bandwidth_gb_per_s": r.read_gbs, "fraction_of_read_bandwidth": r.weight_gbs / r.read_gbs,
                        "paired_read_gb_per_s": r.paired_gbs, "fraction_of_paired_read": r.weight_gbs / r.paired_gbs })
            })
            .collect();
        let out = json!({ "simd": simd.to_string(), "gemv_simd": gemv_simd.unwrap_or(simd).to_string(), "fp8_gemv_simd": fp8_gemv.to_string(), "mxfp4_gemv_simd": mxfp4_gemv.to_string(), "read_bandwidth_gb_per_s": read_gbs,
                          "read_bandwidth_before_gb_per_s": read_before, "read_bandwidth_after_gb_per_s": read_after,
                          "read_threads": 2, "anon_huge_page_mib": huge, "results": results });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "read bandwidth: {read_gbs:.1} GB/s (2 threads summing {} MiB, best of 3; {read_before:.1} before the kernels, {read_after:.1} after); SIMD path {paths}",
        args.read_mib
    );
    println!(
        "median call; `read` is the median GB/s of read-bandwidth passes spread through the row's calls (one before, six among them, one after); `of read` is median weight GB/s over it; `paired` is the median GB/s of another copy of the weights summed on as many threads between the calls, `of pair` the call's share of it; {huge} MiB of anonymous huge pages"
    );
    println!(
        "{:<24} {:<16} {:>4} {:>3} {:>9} {:>11} {:>9} {:>9} {:>6} {:>8} {:>7} {:>8}",
        "kernel",
        "shape [n, k]",
        "rows",
        "thr",
        "ms/call",
        "weight GB/s",
        "best GB/s",
        "GFLOP/s",
        "read",
        "of read",
        "paired",
        "of pair"
    );
    for r in &rows {
        println!(
            "{:<24} {:<16} {:>4} {:>3} {:>9.3} {:>11.1} {:>9.1} {:>9.1} {:>6.1} {:>7.0}% {:>7.1} {:>7.0}%",
            r.name,
            r.shape,
            r.rows,
            r.threads,
            r.ms,
            r.weight_gbs,
            r.best_gbs,
            r.gflops,
            r.read_gbs,
            100.0 * r.weight_gbs / r.read_gbs,
            r.paired_gbs,
            100.0 * r.weight_gbs / r.paired_gbs
        );
    }
    Ok(())
}

/// Whether this CPU runs the packed FP8 kernel.
fn fp8_packs() -> bool {
    #[cfg(target_arch = "x86_64")]
    return fp8_gemm::packs();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// An MXFP4 benchmark on weights packed in 16-row groups, as `build`'s MXFP4 rows otherwise.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn packed<'a>(
    name: &'static str,
    shape: String,
    rows: usize,
    n: usize,
    k: usize,
    working_set: usize,
    mut seed: u64,
    x: Vec<f32>,
    mut out: Vec<f32>,
) -> Bench<'a> {
    let bytes = n * k / 2 + n * k / 32;
    let copies = match working_set {
        0 => 1,
        _ => working_set.div_ceil(bytes).max(MIN_EXPERTS),
    };
    let w: Rc<Vec<mxfp4_gemm::Packed>> = Rc::new(
        (0..copies)
            .map(|_| {
                let w = noise(&mut seed, n * k / 2);
                let s: Vec<u8> = noise(&mut seed, n * k / 32).into_iter().map(|b| 118 + b % 8).collect();
                mxfp4_gemm::Packed::new(&w, &s, n, k).expect("specs keep packed rows where this CPU packs")
            })
            .collect(),
    );
    let cw = Rc::clone(&w);
    Bench {
        name,
        shape,
        rows,
        bytes,
        flops: 2.0 * (rows * n * k) as f64,
        copies,
        call: Box::new(move |i, l| mxfp4_gemm::mxfp4_gemm_packed(&x, &cw[i], &mut out, l, Faults::NONE)),
        read: Box::new(move |i, t| paired_read(&w[i].parts(), t)),
    }
}

/// (name, n, k, rows) of every benchmark this CPU runs; names with `cached` keep one copy of their weights, small enough for L2; `packed` rows hold MXFP4 weights in 16-row groups.
fn specs() -> Vec<(&'static str, usize, usize, usize)> {
    let mut all = vec![
        ("fp8 gemv cached", 1024, 512, 1),
        ("fp8 gemv wq_b", 32768, 1024, 1),
        ("fp8 gemv wo_b", 4096, 8192, 1),
        ("fp8 gemv shared w1", 2048, 4096, 1),
        ("fp8 gemv cached gaussian", 1024, 512, 1),
        ("fp8 gemv w1 gaussian", 2048, 4096, 1),
        ("fp8 gemm shared w1", 2048, 4096, 64),
        ("fp8 gemv packed cached", 1024, 512, 1),
        ("fp8 gemv packed wq_b", 32768, 1024, 1),
        ("fp8 gemv packed wo_b", 4096, 8192, 1),
        ("fp8 gemv packed w1", 2048, 4096, 1),
        ("fp8 gemm packed w1", 2048, 4096, 64),
        ("mxfp4 gemv cached", 256, 4096, 1),
        ("mxfp4 gemv expert w1", 2048, 4096, 1),
        ("mxfp4 gemv expert w2", 4096, 2048, 1),
        ("mxfp4 gemv w1 spread", 2048, 4096, 1),
        ("mxfp4 gemm expert w1", 2048, 4096, 64),
        ("mxfp4 gemv packed cached", 256, 4096, 1),
        ("mxfp4 gemv packed w1", 2048, 4096, 1),
        ("mxfp4 gemv packed w2", 4096, 2048, 1),
        ("mxfp4 gemv packed spread", 2048, 4096, 1),
        ("mxfp4 gemm packed w1", 2048, 4096, 64),
        ("bf16 gemv head", 129_280, 4096, 1),
        ("bf16 gemm router", 256, 4096, 64),
        ("grouped_proj wo_a", 8 * 1024, 4096, 1),
        ("dequant_gemm wo_a", 8 * 1024, 4096, 1),
        ("dequant_gemm wo_a prompt", 8 * 1024, 4096, 64),
    ];
    all.retain(|s| {
        !s.0.contains("packed")
            || if s.0.starts_with("fp8") {
                fp8_packs()
            } else {
                mxfp4_gemm::packs()
            }
    });
    all
}

fn build<'a>((name, n, k, rows): (&'static str, usize, usize, usize), working_set: usize, huge: bool) -> Bench<'a> {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (n * 31 + k) as u64;
    // `spread` rows shrink every sixteenth activation by 10^4: each block then holds values under its largest / 3584, which the exact MXFP4 lanes carry in three digits.
    let shrink = |i: usize| {
        if name.ends_with("spread") && i % 16 == 3 {
            1e-4
        } else {
            1.0
        }
    };
    let x: Vec<f32> = noise(&mut seed, rows * k)
        .into_iter()
        .enumerate()
        .map(|(i, b)| (b as f32 / 64.0 - 2.0) * shrink(i))
        .collect();
    let mut out = vec![0f32; rows * n];
    let flops = 2.0 * (rows * n * k) as f64;
    let shape = format!("[{n}, {k}]");
    if name.starts_with("fp8") {
        let scales = n.div_ceil(128) * k.div_ceil(128);
        let bytes = n * k + scales;
        let copies = working_set.div_ceil(bytes).max(1);
        #[cfg(target_arch = "x86_64")]
        if name.contains("packed") {
            let w: Rc<Vec<fp8_gemm::Packed>> = Rc::new(
                (0..copies)
                    .map(|_| fp8_gemm::Packed::new(&fp8_codes(&mut seed, n * k), &vec![115u8; scales], n, k))
                    .map(|p| p.expect("specs keep packed rows where this CPU packs"))
                    .collect(),
            );
            let cw = Rc::clone(&w);
            return Bench {
                name,
                shape,
                rows,
                bytes,
                flops,
                copies,
                call: Box::new(move |i, l| fp8_gemm::fp8_gemm_packed(&x, &cw[i], &mut out, l, Faults::NONE)),
                read: Box::new(move |i, t| paired_read(&w[i].parts(), t)),
            };
        }
        // Gaussian copies share one draw (only their pages differ): drawing is slow and the kernel's work is the same.
        let gaussian = name.ends_with("gaussian").then(|| gaussian_codes(&mut seed, n * k));
        let codes = |seed: &mut u64| gaussian.clone().unwrap_or_else(|| fp8_codes(seed, n * k));
        let w: Rc<Vec<Weights>> = Rc::new((0..copies).map(|_| place(codes(&mut seed), huge)).collect());
        let s = Rc::new(vec![115u8; scales]);
        let (cw, cs) = (Rc::clone(&w), Rc::clone(&s));
        return Bench {
            name,
            shape,
            rows,
            bytes,
            flops,
            copies,
            call: Box::new(move |i, l| fp8_gemm(&x, &cw[i], &cs, n, k, &mut out, l, Faults::NONE)),
            read: Box::new(move |i, t| paired_read(&[&w[i], &s], t)),
        };
    }
    if name.starts_with("mxfp4") {
        let scales = n * k / 32;
        #[cfg(target_arch = "x86_64")]
        if name.contains("packed") {
            return packed(name, shape, rows, n, k, working_set, seed, x, out);
        }
        let bytes = n * k / 2 + scales;
        // At least 64 experts' weights, so a decode step's experts come from memory as they would in the model.
        let copies = if working_set == 0 {
            1
        } else {
            working_set.div_ceil(bytes).max(MIN_EXPERTS)
        };
        let w: Rc<Vec<Weights>> = Rc::new((0..copies).map(|_| place(noise(&mut seed, n * k / 2), huge)).collect());
        let s: Rc<Vec<Vec<u8>>> = Rc::new(
            (0..copies)
                .map(|_| noise(&mut seed, scales).into_iter().map(|b| 118 + b % 8).collect())
                .collect(),
        );
        let (cw, cs) = (Rc::clone(&w), Rc::clone(&s));
        return Bench {
            name,
            shape,
            rows,
            bytes,
            flops,
            copies,
            call: Box::new(move |i, l| mxfp4_gemm(&x, &cw[i], &cs[i], n, k, &mut out, l, Faults::NONE)),
            read: Box::new(move |i, t| paired_read(&[&w[i], &s[i]], t)),
        };
    }
    if name.starts_with("bf16") {
        let bytes = 2 * n * k;
        let copies = working_set.div_ceil(bytes).max(1);
        let w: Rc<Vec<Vec<u16>>> = Rc::new(
            (0..copies)
                .map(|_| {
                    noise(&mut seed, bytes)
                        .chunks_exact(2)
                        .map(|p| 0x3C00 | (p[0] as u16 & 0x807F) | ((p[1] as u16 & 3) << 7))
                        .collect()
                })
                .collect(),
        );
        let cw = Rc::clone(&w);
        return Bench {
            name,
            shape,
            rows,
            bytes,
            flops,
            copies,
            call: Box::new(move |i, l| bf16_gemm(&x, &cw[i], n, k, &mut out, l, Faults::NONE)),
            read: Box::new(move |i, t| paired_read(&[as_bytes(&w[i])], t)),
        };
    }
    if name.starts_with("dequant_gemm") || name.starts_with("grouped_proj") {
        // wo_a: n = 8 groups * o_lora rows, each group against its own 4096 attention outputs.
        let (groups, o_lora) = (8, n / 8);
        let x: Vec<f32> = noise(&mut seed, rows * groups * k)
            .into_iter()
            .map(|b| b as f32 / 64.0 - 2.0)
            .collect();
        let scales = n.div_ceil(128) * k.div_ceil(128);
        let bytes = n * k + scales;
        let copies = working_set.div_ceil(bytes).max(1);
        let w: Rc<Vec<Vec<u8>>> = Rc::new((0..copies).map(|_| fp8_codes(&mut seed, n * k)).collect());
        let s = Rc::new(vec![115u8; scales]);
        let (cw, cs) = (Rc::clone(&w), Rc::clone(&s));
        // dequant_gemm is wo_a as the model applies it (weights decoded exactly, activations unquantised).
        let call: Call<'a> = if name.starts_with("dequant_gemm") {
            let fp8 = WeightFormat::Fp8Block;
            Box::new(move |i, l| dequant_gemm(&x, &cw[i], &cs, fp8, n, k, groups, &mut out, l, Faults::NONE))
        } else {
            Box::new(move |i, l| grouped_proj(&x, &cw[i], &cs, groups, o_lora, k, &mut out, l, Faults::NONE))
        };
        return Bench {
            name,
            shape: format!("{groups} x [{o_lora}, {k}]"),
            rows,
            bytes,
            flops,
            copies,
            call,
            read: Box::new(move |i, t| paired_read(&[&w[i], &s], t)),
        };
    }
    unreachable!("unknown benchmark {name}")
}

/// One weight copy: on the heap, or in an anonymous map advised MADV_HUGEPAGE.
enum Weights {
    Heap(Vec<u8>),
    Huge(memmap2::MmapMut),
}

impl std::ops::Deref for Weights {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Weights::Heap(v) => v,
            Weights::Huge(m) => m,
        }
    }
}

/// `bytes` as a weight copy, moved into huge pages when `huge` (the advice precedes the first touch).
fn place(bytes: Vec<u8>, huge: bool) -> Weights {
    if !huge {
        return Weights::Heap(bytes);
    }
    let mut map = memmap2::MmapMut::map_anon(bytes.len()).expect("anonymous map for weights");
    map.advise(memmap2::Advice::HugePage).expect("MADV_HUGEPAGE");
    map.copy_from_slice(&bytes);
    Weights::Huge(map)
}

/// This process's anonymous memory in huge pages now, MiB (0 where /proc does not say).
fn huge_page_mib() -> usize {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let line = rollup.lines().find(|l| l.starts_with("AnonHugePages:"));
    let kb = line.and_then(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok());
    kb.unwrap_or(0) >> 10
}

/// Pseudo-random bytes (xorshift).
fn noise(seed: &mut u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// FP8 codes spread over the exponents a quantised weight block uses; no NaN, no subnormals.
fn fp8_codes(seed: &mut u64, len: usize) -> Vec<u8> {
    noise(seed, len)
        .into_iter()
        .map(|b| (b & 0x80) | (0x30 + (b & 0x7F) % 0x48))
        .collect()
}

/// FP8 codes of Gaussian weights quantised as checkpoints are, each 16384 values to a largest magnitude of 448: about one code in 10^4 subnormal.
fn gaussian_codes(seed: &mut u64, len: usize) -> Vec<u8> {
    let unit = |b: &[u8]| (u64::from_le_bytes(b.try_into().expect("8 bytes")) >> 11) as f64 / (1u64 << 53) as f64;
    let z: Vec<f64> = noise(seed, 16 * len.div_ceil(2))
        .chunks_exact(16)
        .flat_map(|p| {
            let (r, t) = (
                (-2.0 * (1.0 - unit(&p[..8])).ln()).sqrt(),
                std::f64::consts::TAU * unit(&p[8..]),
            );
            [r * t.cos(), r * t.sin()]
        })
        .take(len)
        .collect();
    let mut out = Vec::with_capacity(len);
    for block in z.chunks(16384) {
        let s = 448.0 / block.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
        out.extend(block.iter().map(|v| e4m3::encode((v * s) as f32)));
    }
    out
}

/// The read-bandwidth yardstick's buffer, held for the whole run so each row is measured beside its own read.
struct ReadBuffer(Weights);

impl ReadBuffer {
    /// `len` bytes of counting words, in the same pages as the weights (2 MB ones under `--huge-pages`).
    fn new(len: usize, huge: bool) -> Self {
        let bytes: Vec<u8> = (0..(len / 8) as u64).flat_map(u64::to_le_bytes).collect();
        ReadBuffer(place(bytes, huge))
    }

    /// The best of three passes.
    fn best(&self, threads: usize) -> f64 {
        (0..3).map(|_| self.pass(threads)).fold(0.0, f64::max)
    }

    /// GB/s of `threads` threads summing disjoint parts of the buffer once.
    fn pass(&self, threads: usize) -> f64 {
        // SAFETY: any eight bytes are a valid u64.
        let (_, buf, _) = unsafe { self.0.align_to::<u64>() };
        let words = buf.len();
        let start = Instant::now();
        let total: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks(words.div_ceil(threads))
                .map(|part| s.spawn(move || sum(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("read thread"))
                .fold(0, u64::wrapping_add)
        });
        std::hint::black_box(total);
        (words * 8) as f64 / start.elapsed().as_secs_f64() / 1e9
    }
}

/// A SIMD path this CPU runs, by name.
fn simd_path(name: &str) -> Result<SimdPath, String> {
    let have = SimdPath::available();
    let names: Vec<String> = have.iter().map(|p| p.to_string()).collect();
    match have.into_iter().find(|p| p.to_string() == name) {
        Some(p) => Ok(p),
        None => Err(format!("this CPU runs {}", names.join(", "))),
    }
}

/// The bytes of bf16 words.
fn as_bytes(w: &[u16]) -> &[u8] {
    // SAFETY: any u16 is two initialised bytes, and u8 has no alignment.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, 2 * w.len()) }
}

/// Sums `parts` (one weight copy's arrays) on `threads` pool threads, each taking a contiguous share of every part, as the kernels split columns.
fn paired_read(parts: &[&[u8]], threads: usize) -> u64 {
    let mut sums = vec![0u64; threads];
    par_chunks_mut(&mut sums, 1, threads, |t, out| {
        for p in parts {
            let per = p.len().div_ceil(threads).next_multiple_of(64);
            let piece = &p[(t * per).min(p.len())..((t + 1) * per).min(p.len())];
            // SAFETY: any eight bytes are a valid u64.
            let (head, words, tail) = unsafe { piece.align_to::<u64>() };
            let bytes = head.iter().chain(tail).fold(0u64, |a, &b| a.wrapping_add(b as u64));
            out[0] = out[0].wrapping_add(sum(words)).wrapping_add(bytes);
        }
    });
    sums.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// Wrapping sum with eight independent accumulators, on AVX2 where the CPU has it.
fn sum(part: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: avx2 is present, checked above.
        return unsafe { sum_avx2(part) };
    }
    sum_plain(part)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_avx2(part: &[u64]) -> u64 {
    sum_plain(part)
}

#[inline(always)]
fn sum_plain(part: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = part.chunks_exact(8);
    let rest: u64 = chunks.remainder().iter().fold(0, |a, &b| a.wrapping_add(b));
    for c in chunks {
        for j in 0..8 {
            acc[j] = acc[j].wrapping_add(c[j]);
        }
    }
    acc.iter().fold(rest, |a, &b| a.wrapping_add(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_codes_hold_subnormals_as_rarely_as_a_quantised_checkpoint() {
        let codes = gaussian_codes(&mut 7, 1 << 20);
        let count = |f: fn(u8) -> bool| codes.iter().filter(|&&c| f(c)).count();
        let subnormal = count(|c| c & 0x78 == 0 && c & 0x07 != 0);
        assert!((30..=300).contains(&subnormal), "{subnormal} subnormal codes in 2^20");
        assert_eq!(count(|c| c & 0x7F == 0x7F), 0, "no NaN codes");
        let top = count(|c| c & 0x7F == 0x7E);
        assert!(
            (64..1024).contains(&top),
            "each 16384-block's largest magnitude is 448: {top}"
        );
        assert!(
            fp8_codes(&mut 7, 1 << 20).iter().all(|c| c & 0x78 != 0),
            "the other rows' codes hold none"
        );
    }
}
