//! Splitting the output columns of a row-major [rows, n] matrix over the pool's threads; never splits a reduction.

use std::ops::Range;
use std::sync::Mutex;

use super::{run_chunks, run_parts};

/// Calls `f(cols, view)` for contiguous column ranges (starts multiples of `align`) on up to `threads` threads; `view` is [rows, cols.len()].
pub fn par_columns(
    out: &mut [f32],
    rows: usize,
    n: usize,
    threads: usize,
    align: usize,
    f: impl Fn(Range<usize>, &mut [f32]) + Sync,
) {
    assert_eq!(out.len(), rows * n, "par_columns: output is not [rows, n]");
    let per = n.div_ceil(threads.max(1)).next_multiple_of(align.max(1)).max(1);
    if n <= per {
        f(0..n, out);
        return;
    }
    let ranges: Vec<Range<usize>> = (0..n).step_by(per).map(|c| c..(c + per).min(n)).collect();
    if rows == 1 {
        // Each part owns its slice of the single output row.
        run_chunks(out.chunks_mut(per).collect(), |i, chunk| f(ranges[i].clone(), chunk));
        return;
    }
    let locals: Vec<Mutex<Vec<f32>>> = ranges.iter().map(|c| Mutex::new(vec![0f32; rows * c.len()])).collect();
    let parts: Vec<Box<dyn Fn() + Sync + '_>> = ranges
        .iter()
        .zip(&locals)
        .map(|(cols, local)| {
            let f = &f;
            Box::new(move || f(cols.clone(), &mut local.lock().expect("one part per buffer"))) as Box<dyn Fn() + Sync>
        })
        .collect();
    run_parts(&parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>());
    drop(parts);
    for (cols, local) in ranges.iter().zip(locals) {
        let part = local.into_inner().expect("parts finished");
        for (r, src) in part.chunks_exact(cols.len()).enumerate() {
            out[r * n + cols.start..r * n + cols.end].copy_from_slice(src);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_written_once_in_place() {
        for (rows, n, threads, align) in [
            (1, 37, 2, 16),
            (3, 37, 2, 16),
            (3, 5, 4, 1),
            (2, 64, 3, 16),
            (4, 1, 2, 16),
        ] {
            let mut out = vec![-1f32; rows * n];
            par_columns(&mut out, rows, n, threads, align, |cols, view| {
                assert_eq!(cols.start % align, 0);
                for (r, row) in view.chunks_mut(cols.len()).enumerate() {
                    for (c, v) in cols.clone().zip(row) {
                        *v = (r * 1000 + c) as f32;
                    }
                }
            });
            let want: Vec<f32> = (0..rows * n).map(|i| (i / n * 1000 + i % n) as f32).collect();
            assert_eq!(out, want, "rows {rows} n {n} threads {threads}");
        }
    }
}
