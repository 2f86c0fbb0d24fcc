//! CPU `engram_hash`: rows split over threads; per n-gram order a running xor of token * multiplier, then one modulo per head.

use crate::cpu::{CpuLaunch, par_chunks_mut};
use crate::faults::Faults;

/// Table rows of each row's hash heads: `[rows, (max_ngram - 1) * n_heads]`, n-gram 2 heads first.
///
/// `tokens` is `[rows, max_ngram]` (compressed ids of positions p, p-1, .., pad-filled), `primes` the head table sizes.
pub fn engram_hash(
    tokens: &[i32],
    multipliers: &[u64],
    primes: &[i32],
    n_heads: usize,
    out: &mut [i32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    let max_ngram = multipliers.len();
    assert!(max_ngram >= 2, "engram_hash: needs at least two multipliers");
    let heads = (max_ngram - 1) * n_heads;
    assert_eq!(primes.len(), heads, "engram_hash: one prime per head");
    assert_eq!(tokens.len() % max_ngram, 0, "engram_hash: tokens are not whole rows");
    let rows = tokens.len() / max_ngram;
    assert_eq!(out.len(), rows * heads, "engram_hash: output is not [rows, heads]");
    assert!(tokens.iter().all(|&t| t >= 0), "engram_hash: negative token id");
    let offsets: Vec<u64> = primes
        .iter()
        .scan(0u64, |acc, &p| {
            let start = *acc;
            *acc += p as u64;
            Some(start)
        })
        .collect();
    assert!(
        offsets[heads - 1] + primes[heads - 1] as u64 <= i32::MAX as u64,
        "engram_hash: table rows exceed i32"
    );
    let (add_offset, chain) = (!faults.on("no_offset"), !faults.on("last_gram_only"));
    let stale = faults.on("stale_mix");
    if heads == 0 {
        return;
    }
    par_chunks_mut(out, heads, launch.split_threads(out.len()), |first, chunk| {
        for (i, y) in chunk.chunks_mut(heads).enumerate() {
            let t = &tokens[(first + i) * max_ngram..][..max_ngram];
            let mut mix = (t[0] as u64).wrapping_mul(multipliers[0]);
            for n in 1..max_ngram {
                let prev = mix;
                let term = (t[n] as u64).wrapping_mul(multipliers[n]);
                mix = if chain { mix ^ term } else { term };
                let used = if stale { prev } else { mix };
                for h in 0..n_heads {
                    let head = (n - 1) * n_heads + h;
                    let offset = if add_offset { offsets[head] } else { 0 };
                    y[head] = (used % primes[head] as u64 + offset) as i32;
                }
            }
        }
    });
}
