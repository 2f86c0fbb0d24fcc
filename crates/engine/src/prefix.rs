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

/// Captured states keyed by the chained hash of the prefix they follow, evicted least recently used. A hit copies the whole state into the sequence, so no block has two holders and eviction needs no reference counts.
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

    /// Held tokens add up to `used_tokens`, never above capacity; each entry sits under its own chained hash.
    fn assert_accounted(c: &PrefixCache) {
        let held: usize = c.entries.values().map(|e| e.tokens.len()).sum();
        assert_eq!(held, c.used_tokens());
        assert!(c.used_tokens() <= c.capacity_tokens);
        for (h, e) in &c.entries {
            assert_eq!(block_hashes(&e.tokens).last(), Some(h));
            assert_eq!(e.state.len as usize, e.tokens.len());
        }
    }

    #[test]
    fn a_colliding_hash_is_caught_by_the_id_check() {
        let a: Vec<u32> = (0..200).collect();
        let b: Vec<u32> = (1000..1200).collect();
        let mut c = PrefixCache::new(4 * BLOCK_TOKENS);
        let forged = block_hashes(&a)[0];
        c.entries.insert(
            forged,
            Entry {
                tokens: b[..BLOCK_TOKENS].to_vec(),
                state: state(BLOCK_TOKENS as u32),
                last_used: 0,
            },
        );
        c.used_tokens = BLOCK_TOKENS;
        assert!(
            c.lookup(&a).is_none(),
            "a's hash found b's state; the token ids must refuse it"
        );
        assert!(c.lookup(&b).is_none(), "b is stored under a's hash, not its own");
    }

    #[test]
    fn eviction_takes_the_least_recently_used() {
        let p = |salt: u32| -> Vec<u32> { (0..BLOCK_TOKENS as u32).map(|i| i * 3 + salt).collect() };
        let mut c = PrefixCache::new(3 * BLOCK_TOKENS);
        for salt in 0..3 {
            c.insert(&p(salt), &state(BLOCK_TOKENS as u32));
        }
        let mut longer = p(0);
        longer.push(1);
        assert!(c.lookup(&longer).is_some());
        c.insert(&p(2), &state(BLOCK_TOKENS as u32));
        c.insert(&p(3), &state(BLOCK_TOKENS as u32));
        let kept = |c: &mut PrefixCache, salt: u32| {
            let mut q = p(salt);
            q.push(1);
            c.lookup(&q).is_some()
        };
        assert!(!kept(&mut c, 1), "entry 1 was least recently used");
        assert!(kept(&mut c, 0) && kept(&mut c, 2) && kept(&mut c, 3));
        assert_accounted(&c);
    }

    #[test]
    fn ten_thousand_random_operations_leak_nothing() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut c = PrefixCache::new(5 * BLOCK_TOKENS);
        let (mut hits, mut evictions) = (0, 0);
        for _ in 0..10_000 {
            let len = (1 + next(4) as usize) * BLOCK_TOKENS + next(3) as usize;
            let variants: Vec<u32> = (0..5).map(|_| next(2) as u32).collect();
            let prompt: Vec<u32> = (0..len)
                .map(|i| (i / BLOCK_TOKENS) as u32 * 10 + variants[i / BLOCK_TOKENS])
                .collect();
            if next(2) == 0 {
                let whole = len / BLOCK_TOKENS * BLOCK_TOKENS;
                let before = c.entries.len();
                let existed = c
                    .entries
                    .contains_key(&block_hashes(&prompt[..whole])[whole / BLOCK_TOKENS - 1]);
                c.insert(&prompt[..whole], &state(whole as u32));
                if !existed {
                    evictions += before + 1 - c.entries.len();
                }
            } else if let Some((n, s)) = c.lookup(&prompt) {
                hits += 1;
                assert!(n < prompt.len() && n.is_multiple_of(BLOCK_TOKENS));
                assert_eq!(s.len as usize, n, "the state belongs to the prefix found");
                let e = &c.entries[&block_hashes(&prompt[..n])[n / BLOCK_TOKENS - 1]];
                assert_eq!(e.tokens, prompt[..n]);
            }
            assert_accounted(&c);
        }
        assert!(hits > 100 && evictions > 100, "hits {hits}, evictions {evictions}");
    }
}
