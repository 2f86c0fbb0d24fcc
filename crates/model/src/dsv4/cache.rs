//! Each sequence's state for the DeepSeek V4 forward pass: its private tail (window KV, unfinished compressor rows) and its table of blocks (finished compressed KV, indexer keys).

use std::collections::BTreeMap;
use std::ops::Range;

use super::batch::SeqSlot;
use super::blocks::{BLOCK_TOKENS, BlockId, BlockStore};
use crate::config::dsv4::Dsv4Config;

/// What a family's per-sequence state looks like: the window, the compressors each layer owns, the token look-back.
pub trait CacheGeometry {
    fn sliding_window(&self) -> usize;
    /// Floats per window and compressed KV entry.
    fn head_dim(&self) -> usize;
    /// Floats per index key.
    fn index_head_dim(&self) -> usize;
    fn num_main_layers(&self) -> usize;
    /// Layers after the main ones that keep state (MTP layers), each with its own position.
    fn num_mtp_layers(&self) -> usize;
    /// Compress ratio of the compressor layer `layer_idx` owns; 0 when it owns none.
    fn owned_ratio(&self, layer_idx: usize) -> usize;
    /// Whether layer `layer_idx` keeps index keys in the blocks.
    fn owns_index_keys(&self, layer_idx: usize) -> bool;
    /// Whether those keys come from a compressor of their own (V4's indexer) rather than from the KV entries.
    fn has_index_compressor(&self, layer_idx: usize) -> bool;
}

impl CacheGeometry for Dsv4Config {
    fn sliding_window(&self) -> usize {
        self.sliding_window
    }

    fn head_dim(&self) -> usize {
        self.head_dim
    }

    fn index_head_dim(&self) -> usize {
        self.index_head_dim
    }

    fn num_main_layers(&self) -> usize {
        self.num_hidden_layers
    }

    fn num_mtp_layers(&self) -> usize {
        self.num_nextn_predict_layers
    }

    fn owned_ratio(&self, layer_idx: usize) -> usize {
        self.compress_ratio(layer_idx)
    }

    fn owns_index_keys(&self, layer_idx: usize) -> bool {
        self.compress_ratio(layer_idx) == 4
    }

    fn has_index_compressor(&self, layer_idx: usize) -> bool {
        self.compress_ratio(layer_idx) == 4
    }
}

/// A compressor's running state: projections of the tokens from `first_pos` on whose entries are unfinished, and how many entries are finished (they sit in the sequence's blocks).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompressorState {
    pub first_pos: u32,
    pub kv: Vec<f32>,   // [tokens, width]
    pub gate: Vec<f32>, // [tokens, width]
    pub num_entries: usize,
    /// Held for a rollback: `trim` keeps every projection until the mark is settled.
    pub pinned: bool,
}

impl CompressorState {
    /// The first position whose projection a state of `len` tokens still needs (an overlapping ratio-4 entry also reads the window before).
    pub fn keep_from(len: u32, ratio: usize) -> u32 {
        let done = len as usize / ratio;
        let kept = if ratio == 4 { done.saturating_sub(1) } else { done };
        (ratio * kept) as u32
    }

    /// Drops the projections a state of `len` tokens no longer needs, unless pinned.
    pub fn trim(&mut self, len: u32, ratio: usize) {
        let keep_from = Self::keep_from(len, ratio);
        if self.pinned || keep_from <= self.first_pos {
            return;
        }
        let width = self.kv.len() / (len - self.first_pos) as usize;
        let drop = (keep_from - self.first_pos) as usize * width;
        self.kv.drain(..drop);
        self.gate.drain(..drop);
        self.first_pos = keep_from;
    }

    /// From `now` tokens back to the first `len`: later projections and the entries they finished go, then the pin.
    fn truncate(&mut self, now: u32, len: u32, ratio: usize) {
        if now > self.first_pos {
            let width = self.kv.len() / (now - self.first_pos) as usize;
            let held = len.saturating_sub(self.first_pos) as usize * width;
            self.kv.truncate(held);
            self.gate.truncate(held);
        }
        self.num_entries = self.num_entries.min(len as usize / ratio);
        self.pinned = false;
        self.trim(len, ratio);
    }
}

/// One layer's state for one sequence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerCache {
    /// The last `sliding_window` KV entries; position p at row `p % sliding_window`.
    pub window: Vec<f32>, // [sliding_window, head_dim]
    pub compressor: Option<CompressorState>,
    pub indexer: Option<CompressorState>,
}

/// Which layers a mark covers: the main layers (at `len`) or one MTP layer (at its `mtp_len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Main,
    Mtp(usize),
}

/// What a rollback needs beyond the state itself: the window rows that the marked rows overwrite.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub stage: Stage,
    /// The stage's position when marked.
    pub start: u32,
    /// Per covered layer, the window rows of positions `start..` as they were before the marked rows ran.
    pub window: Vec<Vec<f32>>, // [layers][rows, head_dim]
}

/// One sequence's private state across the main layers, then the MTP layers; its finished entries are in its blocks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeqCache {
    /// Tokens the main layers have processed (the next row's position).
    pub len: u32,
    /// Positions each MTP layer has processed.
    pub mtp_len: Vec<u32>,
    pub layers: Vec<LayerCache>,
    /// The main layers' output streams at position `len - 1`, kept for the MTP layer that runs that position once the next token is known.
    pub mtp_stream: Vec<f32>, // [hc, D]
    /// Set while rows that may be rolled back run.
    pub mark: Option<Mark>,
    /// The token ids of positions `0..len`, when the family looks back at them (V4.1's Engram n-grams).
    pub tokens: Vec<u32>,
}

impl SeqCache {
    /// An empty state for a model with `config`.
    pub fn new(config: &(impl CacheGeometry + ?Sized)) -> SeqCache {
        let layers = (0..config.num_main_layers() + config.num_mtp_layers())
            .map(|i| LayerCache {
                window: vec![0.0; config.sliding_window() * config.head_dim()],
                compressor: (config.owned_ratio(i) != 0).then(CompressorState::default),
                indexer: config.has_index_compressor(i).then(CompressorState::default),
            })
            .collect();
        SeqCache {
            len: 0,
            mtp_len: vec![0; config.num_mtp_layers()],
            layers,
            mtp_stream: Vec::new(),
            mark: None,
            tokens: Vec::new(),
        }
    }

    /// The next position `stage` will process.
    pub fn position(&self, stage: Stage) -> u32 {
        match stage {
            Stage::Main => self.len,
            Stage::Mtp(i) => self.mtp_len[i],
        }
    }

    fn layer_range(stage: Stage, config: &(impl CacheGeometry + ?Sized)) -> Range<usize> {
        let main = config.num_main_layers();
        match stage {
            Stage::Main => 0..main,
            Stage::Mtp(i) => main + i..main + i + 1,
        }
    }

    /// Remembers what running up to `rows` more rows through `stage` overwrites, so `settle` can return to any length in between.
    pub fn mark(&mut self, stage: Stage, rows: usize, config: &(impl CacheGeometry + ?Sized)) {
        assert!(self.mark.is_none(), "a sequence holds one mark at a time");
        let (window, hd) = (config.sliding_window(), config.head_dim());
        assert!(rows <= window, "{rows} marked rows overrun the {window}-row window");
        let start = self.position(stage);
        let saved = Self::layer_range(stage, config)
            .map(|l| {
                let layer = &mut self.layers[l];
                for st in [&mut layer.compressor, &mut layer.indexer].into_iter().flatten() {
                    st.pinned = true;
                }
                (start as usize..start as usize + rows)
                    .flat_map(|p| layer.window[p % window * hd..(p % window + 1) * hd].iter().copied())
                    .collect()
            })
            .collect();
        self.mark = Some(Mark {
            stage,
            start,
            window: saved,
        });
    }

    /// Keeps the marked stage's first `len` positions and undoes the rest exactly, as if they never ran; drops the mark.
    pub fn settle(&mut self, len: u32, config: &(impl CacheGeometry + ?Sized)) {
        let mark = self.mark.take().expect("settle needs a mark");
        let now = self.position(mark.stage);
        assert!(
            mark.start <= len && len <= now,
            "settle to {len} outside the marked rows {}..{now}",
            mark.start
        );
        let (window, hd) = (config.sliding_window(), config.head_dim());
        for (l, saved) in Self::layer_range(mark.stage, config).zip(&mark.window) {
            let layer = &mut self.layers[l];
            for p in len..now {
                let (slot, i) = (p as usize % window, (p - mark.start) as usize);
                layer.window[slot * hd..(slot + 1) * hd].copy_from_slice(&saved[i * hd..(i + 1) * hd]);
            }
            let ratio = config.owned_ratio(l);
            for st in [&mut layer.compressor, &mut layer.indexer].into_iter().flatten() {
                st.truncate(now, len, ratio);
            }
        }
        match mark.stage {
            Stage::Main => {
                self.len = len;
                self.tokens.truncate(len as usize);
            }
            Stage::Mtp(i) => self.mtp_len[i] = len,
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
    pub fn seq_mut(&mut self, seq: SeqSlot, config: &(impl CacheGeometry + ?Sized)) -> &mut SeqCache {
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
