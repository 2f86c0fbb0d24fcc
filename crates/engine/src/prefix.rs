//! Prefix reuse: sequence state captured at block boundaries, found by chained block hashes, checked against token ids.

use std::collections::HashMap;

use tensorfold_model::dsv4::cache::SeqCache;

/// Tokens per block; a multiple of every compress ratio (4 and 128), so no compression window spans a boundary.
pub const BLOCK_TOKENS: usize = 128;

/// The chained hash of each whole block of `tokens`: entry i covers `tokens[..(i + 1) * BLOCK_TOKENS]`.
pub fn block_hashes(tokens: &[u32]) -> Vec<u64> {
    let mut h = 0x243F_6A88_85A3_08D3u64;
    tokens
        .chunks_exact(BLOCK_TOKENS)
        .map(|block| {
            for &t in block {
                h = (h ^ t as u64).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(17) ^ 0x9E37_79B9;
            }
            h
        })
        .collect()
}

struct Entry {
    tokens: Vec<u32>,
    state: SeqCache,
    last_used: u64,
}

/// Captured states keyed by the chained hash of the prefix they follow, evicted least recently used.
pub struct PrefixCache {
    entries: HashMap<u64, Entry>,
    capacity_tokens: usize,
    used_tokens: usize,
    clock: u64,
}

impl PrefixCache {
    /// A cache holding states for at most `capacity_tokens` prefix tokens in all.
    pub fn new(capacity_tokens: usize) -> PrefixCache {
        PrefixCache {
            entries: HashMap::new(),
            capacity_tokens,
            used_tokens: 0,
            clock: 0,
        }
    }

    /// Prefix tokens whose states are held.
    pub fn used_tokens(&self) -> usize {
        self.used_tokens
    }

    /// The longest captured prefix of `prompt` that leaves at least one token to compute, and its state.
    pub fn lookup(&mut self, prompt: &[u32]) -> Option<(usize, SeqCache)> {
        self.clock += 1;
        let usable = &prompt[..prompt.len().saturating_sub(1)];
        let hashes = block_hashes(usable);
        for (i, h) in hashes.iter().enumerate().rev() {
            let len = (i + 1) * BLOCK_TOKENS;
            if let Some(e) = self.entries.get_mut(h)
                && e.tokens == prompt[..len]
            {
                e.last_used = self.clock;
                return Some((len, e.state.clone()));
            }
        }
        None
    }

    /// Keeps `state`, the state after exactly `tokens` (a whole number of blocks).
    pub fn insert(&mut self, tokens: &[u32], state: &SeqCache) {
        assert!(
            tokens.len().is_multiple_of(BLOCK_TOKENS) && !tokens.is_empty(),
            "prefix states are taken at block boundaries"
        );
        if tokens.len() > self.capacity_tokens {
            return;
        }
        let h = *block_hashes(tokens).last().expect("at least one block");
        self.clock += 1;
        if let Some(e) = self.entries.get_mut(&h) {
            e.last_used = self.clock;
            return;
        }
        while self.used_tokens + tokens.len() > self.capacity_tokens {
            let oldest = *self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(h, _)| h)
                .expect("non-empty when over");
            let e = self.entries.remove(&oldest).expect("present");
            self.used_tokens -= e.tokens.len();
        }
        self.used_tokens += tokens.len();
        self.entries.insert(
            h,
            Entry {
                tokens: tokens.to_vec(),
                state: state.clone(),
                last_used: self.clock,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(len: u32) -> SeqCache {
        SeqCache {
            len,
            ..Default::default()
        }
    }

    #[test]
    fn finds_the_longest_verified_prefix_and_evicts_lru() {
        let prompt: Vec<u32> = (0..400).collect();
        let mut c = PrefixCache::new(3 * BLOCK_TOKENS);
        c.insert(&prompt[..128], &state(128));
        c.insert(&prompt[..256], &state(256));
        assert_eq!(c.lookup(&prompt).map(|(n, s)| (n, s.len)), Some((256, 256)));
        assert_eq!(
            c.lookup(&prompt[..256]).map(|(n, _)| n),
            Some(128),
            "one token must remain to compute"
        );
        let mut other = prompt.clone();
        other[5] = 9999;
        assert!(c.lookup(&other).is_none());
        c.insert(&other[..256], &state(7));
        assert_eq!(
            c.used_tokens(),
            3 * BLOCK_TOKENS,
            "the least recently used 256-token entry made room for the new one"
        );
        assert_eq!(c.lookup(&prompt).map(|(n, _)| n), Some(128));
    }
}
