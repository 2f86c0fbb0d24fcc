//! Each sequence's state for the DeepSeek V4 forward pass: window KV, compressor state, compressed KV, indexer keys.

use std::collections::BTreeMap;

use super::batch::SeqSlot;
use crate::config::dsv4::Dsv4Config;

/// A compressor's running state: projections of the tokens from `first_pos` on whose entries are unfinished, and the finished entries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompressorState {
    pub first_pos: u32,
    pub kv: Vec<f32>,      // [tokens, width]
    pub gate: Vec<f32>,    // [tokens, width]
    pub entries: Vec<f32>, // [num_entries, head_dim]
}

/// One layer's state for one sequence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerCache {
    /// The last `sliding_window` KV entries; position p at row `p % sliding_window`.
    pub window: Vec<f32>, // [sliding_window, head_dim]
    pub compressor: Option<CompressorState>,
    pub indexer: Option<CompressorState>,
}

/// One sequence's state across the main layers, then the MTP layers.
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

/// Every sequence's state, owned by whoever drives the forward pass (the engine).
#[derive(Clone, Debug, Default)]
pub struct Dsv4Cache {
    pub seqs: BTreeMap<SeqSlot, SeqCache>,
}

impl Dsv4Cache {
    /// The state of `seq`, created empty on first use.
    pub fn seq_mut(&mut self, seq: SeqSlot, config: &Dsv4Config) -> &mut SeqCache {
        self.seqs.entry(seq).or_insert_with(|| SeqCache::new(config))
    }

    /// Forgets `seq`.
    pub fn remove(&mut self, seq: SeqSlot) {
        self.seqs.remove(&seq);
    }
}
