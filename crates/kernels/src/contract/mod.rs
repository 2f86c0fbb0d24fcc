//! The kernel contract: every kernel's cases, float64 reference, launch records and planted controls, and the gates.

pub mod cuda;
mod findings;
mod gates;
mod runner;

pub use cuda::{CompileSummary, check_limits, compile_only};
pub use findings::{Finding, KnownFindings};
pub use gates::{GateFailure, check_case};
pub use runner::{RunOptions, Summary, run};

pub use crate::rng;

use std::fmt;

use crate::cpu::CpuLaunch;
use crate::cuda::{CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// A backend a kernel may run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Cpu,
    Cuda,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        })
    }
}

/// A launch geometry the engine may use; the contract proves each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Launch {
    Cpu(CpuLaunch),
    Cuda(CudaLaunch),
}

impl Launch {
    /// The CPU geometry; a CUDA record handed to a CPU-only path is a registry bug.
    pub fn cpu(&self) -> &CpuLaunch {
        match self {
            Launch::Cpu(l) => l,
            Launch::Cuda(l) => panic!("{l} handed to a kernel that runs only on the CPU"),
        }
    }
}

impl fmt::Display for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Launch::Cpu(l) => l.fmt(f),
            Launch::Cuda(l) => l.fmt(f),
        }
    }
}

/// A buffer of one element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Buf {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I32(Vec<i32>),
}

impl Buf {
    pub fn len(&self) -> usize {
        match self {
            Buf::F32(v) => v.len(),
            Buf::U8(v) => v.len(),
            Buf::I32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements `range` as a new buffer.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Buf {
        match self {
            Buf::F32(v) => Buf::F32(v[range].to_vec()),
            Buf::U8(v) => Buf::U8(v[range].to_vec()),
            Buf::I32(v) => Buf::I32(v[range].to_vec()),
        }
    }

    pub fn f32(&self) -> &[f32] {
        match self {
            Buf::F32(v) => v,
            other => panic!("expected an f32 buffer, found {other:?}"),
        }
    }

    pub fn u8(&self) -> &[u8] {
        match self {
            Buf::U8(v) => v,
            other => panic!("expected a u8 buffer, found {other:?}"),
        }
    }

    pub fn i32(&self) -> &[i32] {
        match self {
            Buf::I32(v) => v,
            other => panic!("expected an i32 buffer, found {other:?}"),
        }
    }

    /// Bit patterns of every element, for bit-exact comparison.
    pub fn bits(&self) -> Vec<u32> {
        match self {
            Buf::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            Buf::U8(v) => v.iter().map(|&x| x as u32).collect(),
            Buf::I32(v) => v.iter().map(|&x| x as u32).collect(),
        }
    }
}

/// A mutable output buffer handed to a kernel.
#[derive(Debug)]
pub enum OutBuf<'a> {
    F32(&'a mut [f32]),
    U8(&'a mut [u8]),
    I32(&'a mut [i32]),
}

impl<'a> OutBuf<'a> {
    pub fn f32(&mut self) -> &mut [f32] {
        match self {
            OutBuf::F32(v) => v,
            other => panic!("expected an f32 output, found {other:?}"),
        }
    }

    pub fn u8(&mut self) -> &mut [u8] {
        match self {
            OutBuf::U8(v) => v,
            other => panic!("expected a u8 output, found {other:?}"),
        }
    }

    pub fn i32(&mut self) -> &mut [i32] {
        match self {
            OutBuf::I32(v) => v,
            other => panic!("expected an i32 output, found {other:?}"),
        }
    }
}

/// One input of a case; `row_len` is `Some` when the tensor is per token row (sliced for gate 3).
#[derive(Clone, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub buf: Buf,
    pub row_len: Option<usize>,
}

impl Arg {
    /// An input shared by all rows (weights, caches).
    pub fn shared(name: &'static str, buf: Buf) -> Arg {
        Arg {
            name,
            buf,
            row_len: None,
        }
    }

    /// An input with `row_len` values per token row.
    pub fn per_row(name: &'static str, buf: Buf, row_len: usize) -> Arg {
        Arg {
            name,
            buf,
            row_len: Some(row_len),
        }
    }
}

/// The element type of an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutKind {
    F32,
    U8,
    I32,
}

/// One output: `row_len` values per token row.
#[derive(Clone, Copy, Debug)]
pub struct OutSpec {
    pub name: &'static str,
    pub kind: OutKind,
    pub row_len: usize,
}

/// A named case: `rows` token rows and the kernel's own size parameters, in `key=value` form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub rows: usize,
    pub params: Vec<(&'static str, usize)>,
}

impl Case {
    pub fn new(rows: usize, params: &[(&'static str, usize)]) -> Case {
        Case {
            rows,
            params: params.to_vec(),
        }
    }

    /// Parameter `key`; panics when the kernel's own case list lacks it.
    pub fn get(&self, key: &str) -> usize {
        self.opt(key)
            .unwrap_or_else(|| panic!("case {self} has no parameter `{key}`"))
    }

    /// Parameter `key`, if this case has it (the optional ones only some cases set).
    pub fn opt(&self, key: &str) -> Option<usize> {
        self.params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The same case with `rows` rows.
    pub fn with_rows(&self, rows: usize) -> Case {
        Case {
            rows,
            params: self.params.clone(),
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rows={}", self.rows)?;
        for (k, v) in &self.params {
            write!(f, ",{k}={v}")?;
        }
        Ok(())
    }
}

/// The accuracy a kernel promises against float64, with the arithmetic that justifies it.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Largest `||y - ref|| / ||ref||` over the whole output.
    pub rel_norm: f64,
    /// Per element: `|y - ref| <= abs + rel * |ref|`.
    pub abs: f64,
    pub rel: f64,
    /// One line: why this bound.
    pub why: &'static str,
}

/// The standard CPU launch records (1 and 2 threads, every SIMD path, three tile sizes); none elsewhere.
pub fn cpu_records(backend: Backend) -> Vec<Launch> {
    match backend {
        Backend::Cpu => CpuLaunch::records().into_iter().map(Launch::Cpu).collect(),
        Backend::Cuda => Vec::new(),
    }
}

/// The CPU records on the CPU, `cuda`'s records on CUDA (none when the kernel has no CUDA version).
pub fn records(backend: Backend, cuda: Option<&CudaKernel>) -> Vec<Launch> {
    match backend {
        Backend::Cpu => cpu_records(backend),
        Backend::Cuda => cuda.map_or_else(Vec::new, |k| k.records.iter().copied().map(Launch::Cuda).collect()),
    }
}

/// `records`, and on the CPU the records of each path in `paths` (those whose launches run a packed form of the kernel here) once more with `packed` set.
pub fn records_packed(backend: Backend, cuda: Option<&CudaKernel>, paths: &[crate::cpu::SimdPath]) -> Vec<Launch> {
    let mut out = records(backend, cuda);
    if backend == Backend::Cpu {
        let again: Vec<Launch> = out
            .iter()
            .filter_map(|l| match l {
                Launch::Cpu(c) if paths.contains(&c.simd) => Some(Launch::Cpu(CpuLaunch { packed: true, ..*c })),
                _ => None,
            })
            .collect();
        out.extend(again);
    }
    out
}

/// Whether this CPU runs a path.
pub type Runs = fn() -> bool;

/// Whether this CPU runs the AVX-512 BF16 path.
pub fn bf16_runs() -> bool {
    crate::cpu::SimdPath::available().contains(&crate::cpu::SimdPath::Avx512Bf16)
}

/// The controls `base`, then those of `own` whose path this CPU runs.
pub fn controls_here(base: &[&'static str], own: &[(&'static str, Runs)]) -> Vec<&'static str> {
    let runs = own.iter().filter(|(_, runs)| runs()).map(|(name, _)| *name);
    base.iter().copied().chain(runs).collect()
}

/// What the contract knows about one kernel.
pub trait Kernel: Sync {
    /// The name used in the folder, registry, CUDA symbol and report.
    fn name(&self) -> &'static str;
    /// The model family that uses it (`dsv4`, ...).
    fn family(&self) -> &'static str;
    /// Later families that reuse this kernel unchanged; `--only` with one of them includes it.
    fn also_in(&self) -> &'static [&'static str] {
        &[]
    }
    fn bound(&self) -> Bound;
    /// The bound of output `name`: the kernel's, unless that output states its own.
    fn output_bound(&self, name: &str) -> Bound {
        let _ = name;
        self.bound()
    }
    fn cases(&self) -> Vec<Case>;
    /// Inputs for `case`, drawn from `rng` (seeded by the case name).
    fn inputs(&self, case: &Case, rng: &mut rng::Rng) -> Vec<Arg>;
    fn outputs(&self, case: &Case) -> Vec<OutSpec>;
    /// The float64 reference, one vector per output.
    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>>;
    /// Launch records on `backend`; empty means unsupported there.
    fn launches(&self, backend: Backend) -> Vec<Launch>;
    /// Names of the planted controls; each must turn a gate red.
    fn controls(&self) -> &'static [&'static str];
    /// The kernel's CUDA side, if it has one.
    fn cuda(&self) -> Option<&'static CudaKernel> {
        None
    }
    /// The planted controls on `backend`.
    fn controls_on(&self, backend: Backend) -> &'static [&'static str] {
        match backend {
            Backend::Cpu => self.controls(),
            Backend::Cuda => self.cuda().map_or(&[], |k| k.controls),
        }
    }
    /// Runs the kernel with `launch` on `case` (rows as in `case.rows`) into `out`.
    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]);
}
