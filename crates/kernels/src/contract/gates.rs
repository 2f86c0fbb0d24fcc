//! Gates 1-4 for one kernel, backend and case: written, accurate, invariant, repeatable.

use std::fmt;
use std::ops::Range;

use super::rng::{Rng, hash_str};
use super::{Arg, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// Elements of guard band on each side of every output.
const GUARD: usize = 64;
/// Two poison patterns: an element left unwritten shows a different value in the two runs.
const POISON: [u32; 2] = [0x7FA5_A5A5, 0x7F5A_5A5A];

/// The first gate a case failed, with what it saw.
#[derive(Clone, Debug)]
pub struct GateFailure {
    pub gate: u8,
    pub detail: String,
}

impl fmt::Display for GateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gate {}: {}", self.gate, self.detail)
    }
}

fn fail(gate: u8, detail: String) -> Result<(), GateFailure> {
    Err(GateFailure { gate, detail })
}

/// What a passing case measured.
#[derive(Clone, Debug, Default)]
pub struct CaseStats {
    pub max_rel_norm: f64,
    pub runs: usize,
}

fn poisoned(kind: OutKind, len: usize, pattern: u32) -> Buf {
    match kind {
        OutKind::F32 => Buf::F32(vec![f32::from_bits(pattern); len]),
        OutKind::U8 => Buf::U8(vec![pattern as u8; len]),
        OutKind::I32 => Buf::I32(vec![pattern as i32; len]),
    }
}

/// Runs `kernel` on `case` twice with different poison, checking guards (gate 1) and repeat bits (gate 4).
fn run_checked(
    kernel: &dyn Kernel,
    case: &Case,
    inputs: &[Arg],
    launch: &Launch,
    faults: Faults,
    what: &str,
) -> Result<Vec<Buf>, GateFailure> {
    let specs = kernel.outputs(case);
    let mut results: Vec<Vec<Buf>> = Vec::new();
    for pattern in POISON {
        let mut bufs: Vec<Buf> = specs
            .iter()
            .map(|s| poisoned(s.kind, s.row_len * case.rows + 2 * GUARD, pattern))
            .collect();
        {
            let mut outs: Vec<OutBuf<'_>> = bufs
                .iter_mut()
                .zip(&specs)
                .map(|(b, s)| {
                    let body = GUARD..GUARD + s.row_len * case.rows;
                    match b {
                        Buf::F32(v) => OutBuf::F32(&mut v[body]),
                        Buf::U8(v) => OutBuf::U8(&mut v[body]),
                        Buf::I32(v) => OutBuf::I32(&mut v[body]),
                    }
                })
                .collect();
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                kernel.run(case, inputs, launch, faults, &mut outs)
            }));
            if let Err(payload) = ran {
                let why = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                fail(1, format!("{what}: the kernel panicked: {why}"))?;
            }
        }
        for (buf, spec) in bufs.iter().zip(&specs) {
            let bits = buf.bits();
            let guard_bits = poisoned(spec.kind, 1, pattern).bits()[0];
            let body_end = bits.len() - GUARD;
            if let Some(i) = (0..GUARD).chain(body_end..bits.len()).find(|&i| bits[i] != guard_bits) {
                let side = if i < GUARD { "before" } else { "after" };
                fail(
                    1,
                    format!(
                        "{what}: output `{}` guard band {side} the output was overwritten",
                        spec.name
                    ),
                )?;
            }
        }
        results.push(
            bufs.into_iter()
                .zip(&specs)
                .map(|(b, s)| b.slice(GUARD..GUARD + s.row_len * case.rows))
                .collect(),
        );
    }
    let (a, b) = (&results[0], &results[1]);
    for ((x, y), spec) in a.iter().zip(b).zip(&specs) {
        let (xb, yb) = (x.bits(), y.bits());
        if let Some(i) = (0..xb.len()).find(|&i| xb[i] != yb[i]) {
            let p0 = poisoned(spec.kind, 1, POISON[0]).bits()[0];
            let p1 = poisoned(spec.kind, 1, POISON[1]).bits()[0];
            let (row, col) = (i / spec.row_len.max(1), i % spec.row_len.max(1));
            if xb[i] == p0 && yb[i] == p1 {
                fail(
                    1,
                    format!(
                        "{what}: output `{}` row {row} element {col} was never written",
                        spec.name
                    ),
                )?;
            }
            fail(
                4,
                format!(
                    "{what}: output `{}` row {row} element {col} differs between two identical launches",
                    spec.name
                ),
            )?;
        }
    }
    Ok(results.swap_remove(0))
}

/// Gate 2: every output within the kernel's bound of the float64 reference.
fn check_accuracy(kernel: &dyn Kernel, specs: &[OutSpec], got: &[Buf], want: &[Vec<f64>]) -> Result<f64, GateFailure> {
    let mut worst = 0f64;
    for ((buf, spec), reference) in got.iter().zip(specs).zip(want) {
        let bound = kernel.output_bound(spec.name);
        let values: Vec<f64> = match buf {
            Buf::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Buf::U8(v) => v.iter().map(|&x| x as f64).collect(),
            Buf::I32(v) => v.iter().map(|&x| x as f64).collect(),
        };
        if values.len() != reference.len() {
            fail(
                2,
                format!(
                    "output `{}` has {} values, the reference {}",
                    spec.name,
                    values.len(),
                    reference.len()
                ),
            )?;
        }
        let exact = spec.kind != OutKind::F32;
        let (mut err2, mut ref2) = (0f64, 0f64);
        for (i, (&y, &r)) in values.iter().zip(reference).enumerate() {
            let at = || {
                format!(
                    "output `{}` row {} element {}",
                    spec.name,
                    i / spec.row_len,
                    i % spec.row_len
                )
            };
            if !y.is_finite() || !r.is_finite() {
                let same = (y.is_nan() && r.is_nan()) || y == r;
                if !same {
                    fail(2, format!("{}: {y} where the reference has {r}", at()))?;
                }
                continue;
            }
            let tol = if exact { 0.0 } else { bound.abs + bound.rel * r.abs() };
            if (y - r).abs() > tol {
                fail(
                    2,
                    format!(
                        "{}: {y:e} vs reference {r:e} (|diff| {:e} > {tol:e})",
                        at(),
                        (y - r).abs()
                    ),
                )?;
            }
            err2 += (y - r) * (y - r);
            ref2 += r * r;
        }
        let rel = if ref2 > 0.0 { (err2 / ref2).sqrt() } else { err2.sqrt() };
        if !exact && rel > bound.rel_norm {
            fail(
                2,
                format!(
                    "output `{}` relative norm error {rel:e} > {:e}",
                    spec.name, bound.rel_norm
                ),
            )?;
        }
        worst = worst.max(rel);
    }
    Ok(worst)
}

/// `inputs` restricted to token rows `rows` (shared inputs unchanged).
fn slice_rows(inputs: &[Arg], rows: Range<usize>) -> Vec<Arg> {
    inputs
        .iter()
        .map(|a| match a.row_len {
            Some(n) => Arg::per_row(a.name, a.buf.slice(rows.start * n..rows.end * n), n),
            None => a.clone(),
        })
        .collect()
}

/// `inputs` with token rows in reverse order.
fn reverse_rows(inputs: &[Arg], num_rows: usize) -> Vec<Arg> {
    inputs
        .iter()
        .map(|a| match a.row_len {
            Some(n) => {
                let parts: Vec<Buf> = (0..num_rows).rev().map(|r| a.buf.slice(r * n..(r + 1) * n)).collect();
                Arg::per_row(a.name, concat(&parts), n)
            }
            None => a.clone(),
        })
        .collect()
}

fn concat(parts: &[Buf]) -> Buf {
    match parts.first() {
        Some(Buf::F32(_)) => Buf::F32(parts.iter().flat_map(|p| p.f32().to_vec()).collect()),
        Some(Buf::U8(_)) => Buf::U8(parts.iter().flat_map(|p| p.u8().to_vec()).collect()),
        Some(Buf::I32(_)) => Buf::I32(parts.iter().flat_map(|p| p.i32().to_vec()).collect()),
        None => Buf::F32(Vec::new()),
    }
}

/// Row compositions gate 3 compares: chunks of 7, a few rows alone, the whole batch reversed.
fn compositions(rows: usize) -> Vec<Vec<Range<usize>>> {
    let mut out = vec![(0..rows).step_by(7).map(|s| s..(s + 7).min(rows)).collect::<Vec<_>>()];
    let mut alone: Vec<usize> = vec![0, rows / 2, rows - 1];
    alone.dedup();
    out.extend(alone.into_iter().map(|r| std::iter::once(r..r + 1).collect()));
    out
}

/// Runs gates 1-4 for one case over every launch in `launches`.
pub fn check_case(
    kernel: &dyn Kernel,
    case: &Case,
    launches: &[Launch],
    faults: Faults,
) -> Result<CaseStats, GateFailure> {
    let seed = hash_str(&format!("{}/{case}", kernel.name()));
    let inputs = kernel.inputs(case, &mut Rng::new(seed, 0));
    let specs = kernel.outputs(case);
    let first = &launches[0];
    let full = run_checked(kernel, case, &inputs, first, faults, &format!("{first}"))?;
    let max_rel_norm = check_accuracy(kernel, &specs, &full, &kernel.reference(case, &inputs))?;
    let mut runs = 2;
    let has_rows = inputs.iter().any(|a| a.row_len.is_some());
    for (idx, launch) in launches.iter().enumerate() {
        if launch != first {
            let other = run_checked(kernel, case, &inputs, launch, faults, &format!("{launch}"))?;
            runs += 2;
            compare_rows(
                &specs,
                &full,
                &other,
                0,
                &format!("whole batch under {launch} vs {first}"),
            )?;
        }
        if !has_rows || case.rows < 2 || (idx != 0 && idx + 1 != launches.len()) {
            continue;
        }
        for parts in compositions(case.rows) {
            for part in parts {
                let sub_case = case.with_rows(part.len());
                let got = run_checked(
                    kernel,
                    &sub_case,
                    &slice_rows(&inputs, part.clone()),
                    launch,
                    faults,
                    "",
                )?;
                runs += 2;
                let what = format!(
                    "rows {}..{} alone under {launch} vs the whole batch",
                    part.start, part.end
                );
                compare_rows(&specs, &full, &got, part.start, &what)?;
            }
        }
        let reversed = run_checked(kernel, case, &reverse_rows(&inputs, case.rows), launch, faults, "")?;
        runs += 2;
        for r in 0..case.rows {
            let row: Vec<Buf> = reversed
                .iter()
                .zip(&specs)
                .map(|(b, s)| b.slice((case.rows - 1 - r) * s.row_len..(case.rows - r) * s.row_len))
                .collect();
            compare_rows(
                &specs,
                &full,
                &row,
                r,
                &format!("row {r} in the reversed batch under {launch}"),
            )?;
        }
    }
    Ok(CaseStats { max_rel_norm, runs })
}

/// Gate 3: `part` (rows starting at `start`) bit-equal to the same rows of `full`.
fn compare_rows(specs: &[OutSpec], full: &[Buf], part: &[Buf], start: usize, what: &str) -> Result<(), GateFailure> {
    for ((f, p), spec) in full.iter().zip(part).zip(specs) {
        let fb = f.bits();
        let pb = p.bits();
        let offset = start * spec.row_len;
        if let Some(i) = (0..pb.len()).find(|&i| pb[i] != fb[offset + i]) {
            let (row, col) = (start + i / spec.row_len, i % spec.row_len);
            fail(
                3,
                format!("{what}: output `{}` row {row} element {col} differs in bits", spec.name),
            )?;
        }
    }
    Ok(())
}
