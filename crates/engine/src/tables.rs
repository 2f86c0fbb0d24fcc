//! Sequences' block tables on the pool: blocks handed out before a pass writes them (copy-on-write when shared), released when a sequence ends.

use tensorfold_model::dsv4::batch::SeqSlot;
use tensorfold_model::dsv4::cache::{Dsv4Cache, blocks_for};

use crate::pool::{BLOCK_TOKENS, BlockPool};

/// Makes `seq`'s blocks cover positions `from..to` before a pass writes them: a block it shares is copied first, a registered one it alone holds is unregistered, missing ones are allocated.
pub fn give_blocks<T>(pool: &mut BlockPool<T>, cache: &mut Dsv4Cache, seq: SeqSlot, from: usize, to: usize) {
    let table = cache.tables.entry(seq).or_default();
    let need = blocks_for(to);
    for i in from / BLOCK_TOKENS..table.len().min(need) {
        let b = table[i];
        if pool.refs(b) > 1 {
            let copy = pool.alloc().expect("admission reserved every block a request holds");
            cache.store.copy(b, copy);
            pool.release(b);
            table[i] = copy;
        } else {
            pool.unregister(b);
        }
    }
    while table.len() < need {
        table.push(pool.alloc().expect("admission reserved every block a request holds"));
    }
}

/// Forgets `seq`'s state and releases its blocks, the last first (so a prefix's tail is reused before its head).
pub fn free_seq<T>(pool: &mut BlockPool<T>, cache: &mut Dsv4Cache, seq: SeqSlot) {
    for b in cache.remove(seq).into_iter().rev() {
        pool.release(b);
    }
}

#[cfg(test)]
mod tests {
    use tensorfold_model::dsv4::blocks::Section;

    use super::*;

    #[test]
    fn a_shared_block_is_copied_before_a_pass_writes_into_it_and_a_registered_one_leaves_reuse() {
        let (mut pool, mut cache) = (BlockPool::new(8), Dsv4Cache::managed());
        let s = Section {
            offset: 0,
            per_block: 32,
            width: 2,
        };
        let (a, b) = (SeqSlot(1), SeqSlot(2));
        give_blocks(&mut pool, &mut cache, a, 0, 200);
        let shared = cache.table(a).to_vec();
        assert_eq!(shared.len(), 2);
        cache.store.put(&shared, s, 5, &[1.0, 2.0], 64);
        shared.iter().for_each(|&blk| pool.retain(blk));
        cache.tables.insert(b, shared.clone());
        // Sequence b went back into its first block: that block is copied, the second (not written) stays shared.
        give_blocks(&mut pool, &mut cache, b, 100, 120);
        let table = cache.table(b).to_vec();
        assert_ne!(table[0], shared[0]);
        assert_eq!(table[1], shared[1]);
        assert_eq!(
            (pool.refs(shared[0]), pool.refs(table[0]), pool.refs(shared[1])),
            (1, 1, 2)
        );
        let mut copied = Vec::new();
        cache.store.gather(&table, s, 6, &mut copied);
        assert_eq!(copied[10..], [1.0, 2.0], "the copy holds the shared block's entries");
        assert!(pool.register(7, 0, &[1], shared[0], ()).is_some());
        give_blocks(&mut pool, &mut cache, a, 120, 121);
        assert!(
            !pool.is_registered(shared[0]),
            "a block written again is no longer offered for reuse"
        );
        assert_eq!(cache.table(a), shared, "a block held alone is written in place");
        free_seq(&mut pool, &mut cache, a);
        free_seq(&mut pool, &mut cache, b);
        assert_eq!(pool.used(), 0);
        pool.assert_consistent();
    }
}
