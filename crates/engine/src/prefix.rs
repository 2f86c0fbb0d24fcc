//! Prefix reuse on the block pool: prompt blocks registered under chained hashes of their token ids, checked against the ids and the previous block on a hit.

use crate::pool::{BLOCK_TOKENS, BlockId, BlockPool};

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

/// The registered blocks of the longest whole-block prefix of `tokens`, each verified against its ids and its predecessor, and the last one's payload.
fn walk<'p, T>(pool: &'p BlockPool<T>, tokens: &[u32]) -> (Vec<BlockId>, u64, Option<&'p T>) {
    let (mut blocks, mut parent, mut last) = (Vec::new(), 0, None);
    for (i, h) in block_hashes(tokens).into_iter().enumerate() {
        let Some(found) = pool.find(h, parent, &tokens[i * BLOCK_TOKENS..(i + 1) * BLOCK_TOKENS]) else {
            break;
        };
        blocks.push(found.block);
        parent = found.serial;
        last = Some(found.payload);
    }
    (blocks, parent, last)
}

/// The blocks of the longest registered prefix of `prompt` that leaves at least one token to compute, and the state to resume from after it; the caller retains the blocks.
pub fn lookup<'p, T>(pool: &'p BlockPool<T>, prompt: &[u32]) -> Option<(Vec<BlockId>, &'p T)> {
    let (blocks, _, last) = walk(pool, &prompt[..prompt.len().saturating_sub(1)]);
    last.map(|payload| (blocks, payload))
}

/// Registers the last block of `table`, which holds `tokens` (whole blocks), with `payload` the state after it; false when it is already registered or an earlier block is not (then it could never be found).
pub fn insert<T>(pool: &mut BlockPool<T>, tokens: &[u32], table: &[BlockId], payload: impl FnOnce() -> T) -> bool {
    assert!(
        tokens.len().is_multiple_of(BLOCK_TOKENS) && !tokens.is_empty(),
        "prefix states are taken at block boundaries"
    );
    let k = tokens.len() / BLOCK_TOKENS;
    assert_eq!(table.len(), k, "the table holds exactly the blocks of the prefix");
    let (blocks, parent, _) = walk(pool, &tokens[..tokens.len() - BLOCK_TOKENS]);
    if blocks.len() + 1 < k {
        return false;
    }
    let h = *block_hashes(tokens).last().expect("at least one block");
    pool.register(
        h,
        parent,
        &tokens[tokens.len() - BLOCK_TOKENS..],
        table[k - 1],
        payload(),
    )
    .is_some()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A sequence's blocks for `tokens` computed on the pool, registering each boundary with its length as payload.
    fn compute(pool: &mut BlockPool<usize>, tokens: &[u32]) -> Vec<BlockId> {
        let mut table = Vec::new();
        for k in 1..=tokens.len() / BLOCK_TOKENS {
            table.push(pool.alloc().expect("a free block"));
            insert(pool, &tokens[..k * BLOCK_TOKENS], &table, || k * BLOCK_TOKENS);
        }
        table
    }

    fn release_all(pool: &mut BlockPool<usize>, table: Vec<BlockId>) {
        for b in table.into_iter().rev() {
            pool.release(b);
        }
    }

    #[test]
    fn finds_the_longest_verified_prefix_and_shares_its_blocks() {
        let prompt: Vec<u32> = (0..400).collect();
        let mut pool = BlockPool::new(8);
        let table = compute(&mut pool, &prompt[..300]);
        let (blocks, &len) = lookup(&pool, &prompt).unwrap();
        assert_eq!((blocks.as_slice(), len), (&table[..2], 256));
        let (blocks, &len) = lookup(&pool, &prompt[..256]).unwrap();
        assert_eq!(
            (blocks.as_slice(), len),
            (&table[..1], 128),
            "one token must remain to compute"
        );
        let mut other = prompt.clone();
        other[5] = 9999;
        assert!(lookup(&pool, &other).is_none());
        other[5] = 5;
        other[200] = 1;
        assert_eq!(
            lookup(&pool, &other).map(|(_, &n)| n),
            Some(128),
            "the first block still matches"
        );
        for &b in &blocks {
            pool.retain(b);
        }
        assert_eq!(pool.refs(table[0]), 2, "a hit shares the block, no copy");
        release_all(&mut pool, blocks);
        release_all(&mut pool, table);
        assert_eq!((pool.used(), pool.cached()), (0, 2));
        pool.assert_consistent();
    }

    #[test]
    fn a_forced_hash_collision_is_caught_by_the_id_check() {
        let a: Vec<u32> = (0..300).collect();
        let b: Vec<u32> = (1000..1300).collect();
        let mut pool = BlockPool::new(4);
        let forged = pool.alloc().unwrap();
        // b's first block registered under a's first hash, as a colliding hash would place it.
        pool.register(block_hashes(&a)[0], 0, &b[..BLOCK_TOKENS], forged, 128)
            .unwrap();
        assert!(
            lookup(&pool, &a).is_none(),
            "a's hash found b's block; the token ids must refuse it"
        );
        assert!(
            lookup(&pool, &b).is_none(),
            "b is registered under a's hash, not its own"
        );
        // A second block whose hash collides but which follows another registration is refused too.
        let first = compute(&mut pool, &b[..BLOCK_TOKENS]);
        let second = pool.alloc().unwrap();
        let h = block_hashes(&a)[1];
        pool.register(h, 0, &a[BLOCK_TOKENS..2 * BLOCK_TOKENS], second, 256)
            .unwrap();
        assert!(
            lookup(&pool, &a).is_none(),
            "a's second block was registered after no first block"
        );
        assert!(
            !insert(&mut pool, &a[..256], &[forged, second], || 256),
            "no verified first block"
        );
        release_all(&mut pool, vec![forged, second]);
        release_all(&mut pool, first);
        pool.assert_consistent();
    }

    #[test]
    fn eviction_takes_the_least_recently_used_prefix() {
        let p = |salt: u32| -> Vec<u32> { (0..=BLOCK_TOKENS as u32).map(|i| i * 3 + salt).collect() };
        let mut pool = BlockPool::new(3);
        for salt in 0..3 {
            let t = compute(&mut pool, &p(salt));
            release_all(&mut pool, t);
        }
        let (hit, _) = lookup(&pool, &p(0)).unwrap();
        pool.retain(hit[0]);
        pool.release(hit[0]);
        let t = compute(&mut pool, &p(3));
        assert!(lookup(&pool, &p(1)).is_none(), "prefix 1 was least recently used");
        assert!([0, 2, 3].iter().all(|&s| lookup(&pool, &p(s)).is_some()));
        release_all(&mut pool, t);
        pool.assert_consistent();
    }

    /// xorshift64.
    fn rng(mut s: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % n
        }
    }

    #[test]
    fn ten_thousand_random_operations_leak_no_block() {
        let mut next = rng(0x2545_F491_4F6C_DD1D);
        let mut pool = BlockPool::new(12);
        // Running sequences (prompt, blocks), and the prefix each block was computed for.
        let mut seqs: Vec<(Vec<u32>, Vec<BlockId>)> = Vec::new();
        let mut content: HashMap<BlockId, Vec<u32>> = HashMap::new();
        let (mut hits, mut inserts, mut evictions, mut releases) = (0, 0, 0, 0);
        for _ in 0..10_000 {
            let blocks = 1 + next(3) as usize;
            let variants: Vec<u32> = (0..blocks).map(|_| next(4) as u32).collect();
            let prompt: Vec<u32> = (0..blocks * BLOCK_TOKENS + 1)
                .map(|i| {
                    let b = (i / BLOCK_TOKENS).min(blocks - 1);
                    (b as u32 * 4 + variants[b]) * 1000 + i as u32
                })
                .collect();
            let registered = pool.registered();
            match next(6) {
                // Alloc or share: a new sequence resumes from the longest registered prefix and computes the rest, when it fits.
                0 | 1 => {
                    let (mut table, len) = match lookup(&pool, &prompt) {
                        Some((t, &len)) => (t, len),
                        None => (Vec::new(), 0),
                    };
                    assert_eq!(len, table.len() * BLOCK_TOKENS);
                    let revived = table.iter().filter(|&&b| pool.refs(b) == 0).count();
                    if pool.total() - pool.used() >= blocks - table.len() + revived {
                        hits += usize::from(len > 0);
                        table.iter().for_each(|&b| pool.retain(b));
                        while table.len() < blocks {
                            let b = pool.alloc().unwrap();
                            content.insert(b, prompt[..(table.len() + 1) * BLOCK_TOKENS].to_vec());
                            table.push(b);
                        }
                        seqs.push((prompt, table));
                    }
                }
                // Release: a sequence ends.
                2 if !seqs.is_empty() => {
                    let (_, table) = seqs.swap_remove(next(seqs.len() as u64) as usize);
                    release_all(&mut pool, table);
                    releases += 1;
                }
                // Insert: a sequence registers one of its boundaries.
                3 if !seqs.is_empty() => {
                    let (tokens, table) = &seqs[next(seqs.len() as u64) as usize];
                    let k = 1 + next(table.len() as u64) as usize;
                    inserts += usize::from(insert(&mut pool, &tokens[..k * BLOCK_TOKENS], &table[..k], || {
                        k * BLOCK_TOKENS
                    }));
                }
                // Evict: memory pressure takes a free block and gives it back.
                4 => {
                    if let Some(b) = pool.alloc() {
                        assert!(!pool.is_registered(b));
                        pool.release(b);
                    }
                }
                // Lookup: every block found holds exactly its prefix of the prompt.
                _ => {
                    if let Some((table, &len)) = lookup(&pool, &prompt) {
                        assert!(len < prompt.len() && len == table.len() * BLOCK_TOKENS);
                        for (i, b) in table.iter().enumerate() {
                            assert_eq!(content[b], prompt[..(i + 1) * BLOCK_TOKENS]);
                        }
                    }
                }
            }
            evictions += registered.saturating_sub(pool.registered());
            pool.assert_consistent();
        }
        while let Some((_, table)) = seqs.pop() {
            release_all(&mut pool, table);
        }
        pool.assert_consistent();
        assert_eq!(pool.used(), 0, "a block is still held");
        assert!(
            hits > 500 && inserts > 60 && evictions > 60 && releases > 500,
            "hits {hits}, inserts {inserts}, evictions {evictions}, releases {releases}"
        );
    }
}
