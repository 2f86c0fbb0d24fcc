//! Engram's per-layer hash constants: odd multipliers from numpy's generator and prime table sizes.

use tensorfold_kernels::Faults;
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::engram_hash::engram_hash;

use super::numpy_rng;

/// numpy seed stride between Engram layers (`seed + 10007 * layer_id`).
const LAYER_SEED_STRIDE: u64 = 10_007;

/// The constants of one Engram layer's n-gram hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerTables {
    pub layer_idx: usize,
    /// One odd multiplier per look-back slot 0..max_ngram.
    pub multipliers: Vec<u64>,
    /// Table size (a prime) per hash head, n-gram 2 heads first: `[(max_ngram - 1) * n_heads]`.
    pub primes: Vec<u64>,
    /// First embedding row of each head (running sums of `primes`).
    pub offsets: Vec<u64>,
}

impl LayerTables {
    /// Rows of this layer's `engram.embed` (the sum of its primes).
    pub fn num_rows(&self) -> u64 {
        self.primes.iter().sum()
    }
}

/// `default_rng(10007 * layer).integers(0, B, max_ngram) * 2 + 1`, `B = (2^63 - 1) // compressed_vocab // 2`.
pub fn multipliers(layer_idx: usize, max_ngram: usize, compressed_vocab: u64) -> Vec<u64> {
    let half_bound = (i64::MAX as u64 / compressed_vocab / 2).max(1);
    let seed = LAYER_SEED_STRIDE * layer_idx as u64;
    numpy_rng::integers(seed, half_bound, max_ngram)
        .into_iter()
        .map(|r| r * 2 + 1)
        .collect()
}

/// Whether `n` is prime (trial division; table sizes stay below 2^40).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2u64;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

/// Every Engram layer's constants, in layer order: for each n-gram, `n_heads` primes above `vocab - 1` not used before.
pub fn layer_tables(
    layer_ids: &[usize],
    vocab_per_ngram: &[usize],
    n_heads: usize,
    compressed_vocab: u64,
) -> Vec<LayerTables> {
    let mut seen = std::collections::BTreeSet::new();
    layer_ids
        .iter()
        .map(|&layer_idx| {
            let mut primes = Vec::with_capacity(vocab_per_ngram.len() * n_heads);
            for &vocab in vocab_per_ngram {
                let mut candidate = vocab as u64;
                for _ in 0..n_heads {
                    while !is_prime(candidate) || seen.contains(&candidate) {
                        candidate += 1;
                    }
                    seen.insert(candidate);
                    primes.push(candidate);
                }
            }
            let offsets = primes
                .iter()
                .scan(0u64, |acc, &p| {
                    let start = *acc;
                    *acc += p;
                    Some(start)
                })
                .collect();
            LayerTables {
                layer_idx,
                multipliers: multipliers(layer_idx, vocab_per_ngram.len() + 1, compressed_vocab),
                primes,
                offsets,
            }
        })
        .collect()
}

/// Embedding rows of each head at position `pos`: `compressed[p]` is the token map of the sequence up to `pos`.
///
/// `[(max_ngram - 1) * n_heads]` row ids, n-gram 2 first; look-backs before the sequence start read `pad`.
pub fn row_ids(tables: &LayerTables, compressed: &[u64], pos: usize, pad: u64, n_heads: usize, out: &mut [u64]) {
    let max_ngram = tables.multipliers.len();
    assert_eq!(
        out.len(),
        (max_ngram - 1) * n_heads,
        "engram row ids: wrong output length"
    );
    let tokens: Vec<i32> = (0..max_ngram)
        .map(|back| if pos >= back { compressed[pos - back] } else { pad } as i32)
        .collect();
    let primes: Vec<i32> = tables.primes.iter().map(|&p| p as i32).collect();
    let mut rows = vec![0i32; out.len()];
    engram_hash(
        &tokens,
        &tables.multipliers,
        &primes,
        n_heads,
        &mut rows,
        &CpuLaunch::serial(),
        Faults::NONE,
    );
    for (o, r) in out.iter_mut().zip(rows) {
        *o = r as u64;
    }
}
