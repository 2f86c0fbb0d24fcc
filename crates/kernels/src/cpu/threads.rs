//! Splitting independent output items over the worker pool's threads; never splits a reduction.

use std::sync::Mutex;

use crate::gemm::run_parts;

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
    let chunks: Vec<Mutex<(usize, &mut [T])>> = out
        .chunks_mut(per_thread * item_len)
        .enumerate()
        .map(|(t, c)| Mutex::new((t * per_thread, c)))
        .collect();
    let parts: Vec<Box<dyn Fn() + Sync + '_>> = chunks
        .iter()
        .map(|chunk| {
            let f = &f;
            Box::new(move || {
                let mut guard = chunk.lock().expect("one part per chunk");
                let (first, c) = &mut *guard;
                f(*first, c)
            }) as Box<dyn Fn() + Sync>
        })
        .collect();
    run_parts(&parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>());
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
