//! Splitting independent output items over the worker pool's threads; never splits a reduction.

use crate::gemm::run_chunks;

/// Calls `f(first_item, chunk)` for contiguous chunks of `out` (`item_len` values per item) on up to `threads` threads.
pub fn par_chunks_mut<T: Send>(out: &mut [T], item_len: usize, threads: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let item_len = item_len.max(1);
    let items = out.len() / item_len;
    let threads = threads.clamp(1, items.max(1));
    if threads == 1 {
        f(0, out);
        return;
    }
    let per_thread = items.div_ceil(threads);
    run_chunks(out.chunks_mut(per_thread * item_len).collect(), |t, c| {
        f(t * per_thread, c)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_visited_once_with_its_index() {
        for threads in 1..5 {
            let mut out = vec![0usize; 3 * 11];
            par_chunks_mut(&mut out, 3, threads, |first, chunk| {
                for (i, item) in chunk.chunks_mut(3).enumerate() {
                    item.fill(first + i + 1);
                }
            });
            let want: Vec<usize> = (0..11).flat_map(|i| [i + 1; 3]).collect();
            assert_eq!(out, want, "threads {threads}");
        }
    }
}
