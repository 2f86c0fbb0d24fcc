//! The block pool: a fixed number of cache blocks with reference counts, and a free list whose registered blocks stay findable until reused, least recently released first.

use std::collections::{BTreeMap, HashMap};

pub use tensorfold_model::dsv4::blocks::{BLOCK_TOKENS, BlockId};

/// A block registered for reuse: the token ids it covers, the registration it follows, and what a sequence resumes from after it.
struct Registered<T> {
    block: BlockId,
    serial: u64,
    /// The serial of the previous block's registration; 0 for a first block.
    parent: u64,
    tokens: Vec<u32>,
    payload: T,
}

/// What a lookup found: the registration's serial (the parent of the next block), its block and payload.
pub struct Found<'p, T> {
    pub serial: u64,
    pub block: BlockId,
    pub payload: &'p T,
}

/// Blocks `0..total`, each free (unregistered, or registered and reusable) or held by one or more sequences.
pub struct BlockPool<T> {
    refs: Vec<u32>,
    /// The hash each block is registered under.
    hash_of: Vec<Option<u64>>,
    /// Free blocks that hold nothing registered; taken first.
    plain: Vec<BlockId>,
    /// Free registered blocks by release time, reused oldest first when no plain block is left.
    lru: BTreeMap<u64, BlockId>,
    released_at: Vec<u64>,
    clock: u64,
    registry: HashMap<u64, Registered<T>>,
    next_serial: u64,
    num_used: usize,
    num_evicted: u64,
}

impl<T> BlockPool<T> {
    /// A pool of `total` free blocks.
    pub fn new(total: usize) -> BlockPool<T> {
        BlockPool {
            refs: vec![0; total],
            hash_of: vec![None; total],
            plain: (0..total as u32).rev().map(BlockId).collect(),
            lru: BTreeMap::new(),
            released_at: vec![0; total],
            clock: 0,
            registry: HashMap::new(),
            next_serial: 1,
            num_used: 0,
            num_evicted: 0,
        }
    }

    pub fn total(&self) -> usize {
        self.refs.len()
    }

    /// Blocks some sequence holds.
    pub fn used(&self) -> usize {
        self.num_used
    }

    /// Free blocks kept for reuse by their registration.
    pub fn cached(&self) -> usize {
        self.lru.len()
    }

    /// Registered blocks taken for other data since the start.
    pub fn evictions(&self) -> u64 {
        self.num_evicted
    }

    /// Registered blocks, held or free.
    pub fn registered(&self) -> usize {
        self.registry.len()
    }

    pub fn refs(&self, b: BlockId) -> u32 {
        self.refs[b.0 as usize]
    }

    pub fn is_registered(&self, b: BlockId) -> bool {
        self.hash_of[b.0 as usize].is_some()
    }

    /// Takes a free block with one reference: a plain one, else the least recently released registered one (dropping its registration); `None` when every block is held.
    pub fn alloc(&mut self) -> Option<BlockId> {
        let b = match self.plain.pop() {
            Some(b) => b,
            None => {
                let (_, b) = self.lru.pop_first()?;
                let h = self.hash_of[b.0 as usize].take().expect("a cached block is registered");
                self.registry.remove(&h);
                self.num_evicted += 1;
                b
            }
        };
        self.refs[b.0 as usize] = 1;
        self.num_used += 1;
        Some(b)
    }

    /// Adds a holder to a held block or to a free registered one (found by a lookup).
    pub fn retain(&mut self, b: BlockId) {
        let i = b.0 as usize;
        if self.refs[i] == 0 {
            assert!(
                self.lru.remove(&self.released_at[i]).is_some(),
                "block {i} is free and unregistered; alloc it instead"
            );
            self.num_used += 1;
        }
        self.refs[i] += 1;
    }

    /// Drops a holder; a block nobody holds becomes free (kept findable when registered).
    pub fn release(&mut self, b: BlockId) {
        let i = b.0 as usize;
        assert!(self.refs[i] > 0, "block {i} released more often than held");
        self.refs[i] -= 1;
        if self.refs[i] > 0 {
            return;
        }
        self.num_used -= 1;
        if self.hash_of[i].is_some() {
            self.clock += 1;
            self.released_at[i] = self.clock;
            self.lru.insert(self.clock, b);
        } else {
            self.plain.push(b);
        }
    }

    /// Registers held block `b` under `hash` after the registration `parent` (0 for a first block); `None` when the hash or the block is already registered.
    pub fn register(&mut self, hash: u64, parent: u64, tokens: &[u32], b: BlockId, payload: T) -> Option<u64> {
        let i = b.0 as usize;
        assert!(self.refs[i] > 0, "only a held block can be registered");
        if self.registry.contains_key(&hash) || self.hash_of[i].is_some() {
            return None;
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        self.hash_of[i] = Some(hash);
        self.registry.insert(
            hash,
            Registered {
                block: b,
                serial,
                parent,
                tokens: tokens.to_vec(),
                payload,
            },
        );
        Some(serial)
    }

    /// Drops `b`'s registration (before it is written again); a free block becomes plain.
    pub fn unregister(&mut self, b: BlockId) {
        let i = b.0 as usize;
        let Some(h) = self.hash_of[i].take() else { return };
        self.registry.remove(&h);
        if self.refs[i] == 0 {
            self.lru.remove(&self.released_at[i]);
            self.plain.push(b);
        }
    }

    /// The registration under `hash`, if it follows `parent` and covers exactly `tokens` (a colliding hash fails this check).
    pub fn find(&self, hash: u64, parent: u64, tokens: &[u32]) -> Option<Found<'_, T>> {
        let r = self.registry.get(&hash)?;
        (r.parent == parent && r.tokens == tokens).then_some(Found {
            serial: r.serial,
            block: r.block,
            payload: &r.payload,
        })
    }

    /// Checks every count against the blocks: each block is held, plain or cached exactly once, and registrations match.
    #[cfg(test)]
    pub(crate) fn assert_consistent(&self) {
        let held = self.refs.iter().filter(|&&r| r > 0).count();
        assert_eq!(held, self.num_used);
        assert_eq!(held + self.plain.len() + self.lru.len(), self.total());
        for b in &self.plain {
            assert_eq!(self.refs(*b), 0);
            assert!(!self.is_registered(*b));
        }
        for (&at, b) in &self.lru {
            assert_eq!(self.refs(*b), 0);
            assert!(self.is_registered(*b));
            assert_eq!(self.released_at[b.0 as usize], at);
        }
        assert_eq!(self.registry.len(), self.hash_of.iter().flatten().count());
        for (h, r) in &self.registry {
            assert_eq!(self.hash_of[r.block.0 as usize], Some(*h));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_counts_free_a_block_when_the_last_holder_releases() {
        let mut p = BlockPool::<()>::new(2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_ne!(a, b);
        assert!(p.alloc().is_none(), "two blocks, both held");
        p.retain(a);
        assert_eq!((p.refs(a), p.used()), (2, 2));
        p.release(a);
        assert!(p.alloc().is_none(), "a still has a holder");
        p.release(a);
        assert_eq!((p.refs(a), p.used()), (0, 1));
        assert_eq!(p.alloc(), Some(a));
        p.assert_consistent();
    }

    #[test]
    #[should_panic(expected = "released more often than held")]
    fn releasing_a_free_block_is_a_bug() {
        let mut p = BlockPool::<()>::new(1);
        let a = p.alloc().unwrap();
        p.release(a);
        p.release(a);
    }

    #[test]
    fn plain_blocks_go_first_then_registered_ones_least_recently_released_first() {
        let mut p = BlockPool::new(4);
        let blocks: Vec<BlockId> = (0..4).map(|_| p.alloc().unwrap()).collect();
        for (i, &b) in blocks[..3].iter().enumerate() {
            p.register(100 + i as u64, 0, &[i as u32], b, i).unwrap();
        }
        for i in [1, 0, 2, 3] {
            p.release(blocks[i]);
        }
        assert_eq!(p.cached(), 3);
        // A hit on block 1 holds it again; its release makes it the most recently used.
        let hit = p.find(101, 0, &[1]).unwrap().block;
        p.retain(hit);
        p.release(hit);
        assert_eq!(p.alloc(), Some(blocks[3]), "the unregistered block is reused first");
        assert_eq!(p.alloc(), Some(blocks[0]), "then the least recently released");
        assert!(p.find(100, 0, &[0]).is_none(), "its registration went with it");
        assert_eq!(p.alloc(), Some(blocks[2]));
        assert_eq!(p.alloc(), Some(blocks[1]));
        assert_eq!(p.registered(), 0);
        p.assert_consistent();
    }

    #[test]
    fn a_colliding_hash_is_caught_by_the_id_check() {
        let mut p = BlockPool::new(2);
        let a = p.alloc().unwrap();
        let s = p.register(7, 0, &[1, 2, 3], a, "a").unwrap();
        assert_eq!(p.find(7, 0, &[1, 2, 3]).map(|f| (f.serial, *f.payload)), Some((s, "a")));
        assert!(p.find(7, 0, &[1, 2, 4]).is_none(), "same hash, other tokens");
        assert!(
            p.find(7, s, &[1, 2, 3]).is_none(),
            "same hash and tokens after another block"
        );
        let b = p.alloc().unwrap();
        assert_eq!(
            p.register(7, 0, &[9, 9, 9], b, "b"),
            None,
            "a taken hash keeps its block"
        );
        assert_eq!(p.register(8, 0, &[1], a, "c"), None, "a block has one registration");
        p.unregister(a);
        assert!(p.find(7, 0, &[1, 2, 3]).is_none());
        p.assert_consistent();
    }
}
