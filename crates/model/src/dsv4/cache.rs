//! Each sequence's state for the DeepSeek V4 forward pass: its private tail (window KV, unfinished compressor rows) and its table of blocks (finished compressed KV, indexer keys).

use std::collections::BTreeMap;

use super::batch::SeqSlot;
use super::blocks::{BLOCK_TOKENS, BlockId, BlockStore};
use crate::config::dsv4::Dsv4Config;

/// A compressor's running state: projections of the tokens from `first_pos` on whose entries are unfinished, and how many entries are finished (they sit in the sequence's blocks).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompressorState {
    pub first_pos: u32,
    pub kv: Vec<f32>,   // [tokens, width]
    pub gate: Vec<f32>, // [tokens, width]
    pub num_entries: usize,
}

/// One layer's state for one sequence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerCache {
    /// The last `sliding_window` KV entries; position p at row `p % sliding_window`.
    pub window: Vec<f32>, // [sliding_window, head_dim]
    pub compressor: Option<CompressorState>,
    pub indexer: Option<CompressorState>,
}

/// One sequence's private state across the main layers, then the MTP layers; its finished entries are in its blocks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeqCache {
    /// Tokens the main layers have processed (the next row's position).
    pub len: u32,
    /// Positions each MTP layer has processed.
    pub mtp_len: Vec<u32>,
    pub layers: Vec<LayerCache>,
}

impl SeqCache {
    /// An empty state for a model with `config`.
    pub fn new(config: &Dsv4Config) -> SeqCache {
        let layers = (0..config.compress_ratios.len())
            .map(|i| {
                let ratio = config.compress_ratio(i);
                LayerCache {
                    window: vec![0.0; config.sliding_window * config.head_dim],
                    compressor: (ratio != 0).then(CompressorState::default),
                    indexer: (ratio == 4).then(CompressorState::default),
                }
            })
            .collect();
        SeqCache {
            len: 0,
            mtp_len: vec![0; config.num_nextn_predict_layers],
            layers,
        }
    }
}

/// Blocks that hold the entries of positions below `end`.
pub fn blocks_for(end: usize) -> usize {
    end.div_ceil(BLOCK_TOKENS)
}

/// Every sequence's state, owned by whoever drives the forward pass (the engine).
#[derive(Clone, Debug, Default)]
pub struct Dsv4Cache {
    pub seqs: BTreeMap<SeqSlot, SeqCache>,
    /// Each sequence's blocks: block i holds the entries of positions `[128 i, 128 (i + 1))`.
    pub tables: BTreeMap<SeqSlot, Vec<BlockId>>,
    pub store: BlockStore,
}

impl Dsv4Cache {
    /// A cache whose blocks the owner allocates before each pass (see `BlockStore::managed`).
    pub fn managed() -> Dsv4Cache {
        Dsv4Cache {
            store: BlockStore::managed(),
            ..Default::default()
        }
    }

    /// The state of `seq`, created empty on first use.
    pub fn seq_mut(&mut self, seq: SeqSlot, config: &Dsv4Config) -> &mut SeqCache {
        self.seqs.entry(seq).or_insert_with(|| SeqCache::new(config))
    }

    /// The blocks of `seq`.
    pub fn table(&self, seq: SeqSlot) -> &[BlockId] {
        self.tables.get(&seq).map_or(&[], Vec::as_slice)
    }

    /// Checks that `seq` has blocks for positions below `end`; a cache that is not managed takes them itself.
    pub fn cover(&mut self, seq: SeqSlot, end: usize) -> Result<(), String> {
        let need = blocks_for(end);
        let table = self.tables.entry(seq).or_default();
        if self.store.is_managed() {
            if table.len() < need {
                return Err(format!(
                    "sequence {} holds {} blocks but positions up to {end} need {need}; the owner allocates blocks before the pass",
                    seq.0,
                    table.len()
                ));
            }
        } else {
            while table.len() < need {
                table.push(self.store.take());
            }
        }
        Ok(())
    }

    /// Forgets `seq` and returns its blocks for the owner to release (a cache that is not managed keeps them for reuse).
    pub fn remove(&mut self, seq: SeqSlot) -> Vec<BlockId> {
        self.seqs.remove(&seq);
        let table = self.tables.remove(&seq).unwrap_or_default();
        if self.store.is_managed() {
            table
        } else {
            self.store.give_back(table);
            Vec::new()
        }
    }
}
