//! What running requests reserve of the pool: the blocks of their tokens, and blocks held out of the pool to cover the state they keep outside it.

use tensorfold_model::dsv4::blocks::BlockStore;
use tensorfold_model::dsv4::cache::{SeqCache, blocks_for};

use crate::pool::{BlockId, BlockPool};
use crate::runner::Runner;

/// Pool blocks that let `requests` requests of `tokens` tokens each run together, their state outside the blocks included.
pub fn pool_blocks_for(runner: &dyn Runner, tokens: usize, requests: usize) -> usize {
    let state = SeqCache::max_floats(runner.geometry(), tokens) * size_of::<f32>();
    let block = runner.layout().bytes().max(1);
    let per_request = blocks_for(tokens) * block + state;
    per_request.saturating_mul(requests).div_ceil(block)
}

/// Admission's ledger; every block it counts is one the pool cannot lend elsewhere.
#[derive(Debug, Default)]
pub struct Reservations {
    /// Blocks reserved for running requests' tokens.
    blocks: usize,
    /// Bytes running requests may hold outside the pool, at most.
    state_bytes: usize,
    /// Blocks taken out of the pool (their memory freed) so that the pool's budget covers `state_bytes`.
    held: Vec<BlockId>,
    block_bytes: usize,
}

impl Reservations {
    pub fn new(block_bytes: usize) -> Reservations {
        Reservations {
            block_bytes: block_bytes.max(1),
            ..Default::default()
        }
    }

    /// Blocks that cover `bytes` of state.
    pub fn state_blocks(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.block_bytes)
    }

    /// The ledger with requests of `need` blocks and `state` bytes in all taken out.
    pub fn without(&self, need: usize, state: usize) -> Reservations {
        Reservations {
            blocks: self.blocks - need,
            state_bytes: self.state_bytes - state,
            held: Vec::new(),
            block_bytes: self.block_bytes,
        }
    }

    /// Blocks reserved in all, with a request of `need` blocks and `state` bytes added.
    pub fn with(&self, need: usize, state: usize) -> usize {
        self.blocks + need + self.state_blocks(self.state_bytes + state)
    }

    /// Blocks reserved in all.
    pub fn total(&self) -> usize {
        self.with(0, 0)
    }

    /// Blocks held out of the pool for state.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Reserves a request's blocks and state; the caller checked that `with(need, state)` fits the pool.
    pub fn add<T>(&mut self, pool: &mut BlockPool<T>, store: &mut BlockStore, need: usize, state: usize) {
        self.blocks += need;
        self.state_bytes += state;
        self.hold(pool, store);
    }

    /// Returns a request's blocks and state.
    pub fn remove<T>(&mut self, pool: &mut BlockPool<T>, store: &mut BlockStore, need: usize, state: usize) {
        self.blocks -= need;
        self.state_bytes -= state;
        self.hold(pool, store);
    }

    /// Holds out exactly the blocks that cover the reserved state.
    fn hold<T>(&mut self, pool: &mut BlockPool<T>, store: &mut BlockStore) {
        let want = self.state_blocks(self.state_bytes);
        while self.held.len() > want {
            pool.release(self.held.pop().expect("a held block"));
        }
        while self.held.len() < want {
            let b = pool
                .alloc()
                .expect("admission left room for the state of every running request");
            store.drop_block(b);
            self.held.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_held_out_in_whole_blocks_and_given_back() {
        let (mut pool, mut store) = (BlockPool::<()>::new(4), BlockStore::managed());
        let mut r = Reservations::new(100);
        assert_eq!(r.with(1, 150), 3);
        r.add(&mut pool, &mut store, 1, 150);
        assert_eq!((r.total(), r.held(), pool.used()), (3, 2, 2));
        r.add(&mut pool, &mut store, 0, 40);
        assert_eq!(
            (r.total(), r.held()),
            (3, 2),
            "two requests' state shares the blocks it fills"
        );
        r.remove(&mut pool, &mut store, 1, 150);
        assert_eq!((r.total(), r.held(), pool.used()), (1, 1, 1));
        r.remove(&mut pool, &mut store, 0, 40);
        assert_eq!((r.total(), r.held(), pool.used()), (0, 0, 0));
        pool.assert_consistent();
    }
}
