//! Each sequence's state for the DeepSeek V4 forward pass: its table of blocks (window KV, finished compressed KV, indexer keys, what a boundary carries) and the projections of its unfinished compression windows.

use std::collections::BTreeMap;
use std::ops::Range;

use super::batch::{SeqRows, SeqSlot};
use super::blocks::{BLOCK_TOKENS, BlockId, BlockLayout, BlockStore, EntryKind};
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
    /// Floats per row of the output streams the MTP layers run after a boundary (`hc_mult * hidden_size`).
    fn stream_width(&self) -> usize;
    /// Whether a sequence keeps the token ids of its positions (V4.1's Engram n-grams look back at them).
    fn keeps_tokens(&self) -> bool;
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

    fn stream_width(&self) -> usize {
        self.hc_mult * self.hidden_size
    }

    fn keeps_tokens(&self) -> bool {
        false
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

/// One layer's compressor states for one sequence (its window rows are in the sequence's blocks).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerCache {
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

/// One sequence's state outside its blocks, across the main layers, then the MTP layers: positions and unfinished compression windows.
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
    /// The token ids of positions `0..len`, when the family looks back at them (V4.1's Engram n-grams); each block keeps its own too.
    pub tokens: Vec<u32>,
}

impl SeqCache {
    /// An empty state for a model with `config`.
    pub fn new(config: &(impl CacheGeometry + ?Sized)) -> SeqCache {
        let layers = (0..config.num_main_layers() + config.num_mtp_layers())
            .map(|i| LayerCache {
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

    /// Floats held outside the blocks: projections of unfinished compression windows, the MTP input stream, rows saved for a rollback, the token look-back.
    pub fn floats(&self) -> usize {
        let layers = self.layers.iter().flat_map(|l| [&l.compressor, &l.indexer]).flatten();
        let saved = self.mark.as_ref().map_or(0, |m| m.window.iter().map(Vec::len).sum());
        layers.map(|s| s.kv.len() + s.gate.len()).sum::<usize>() + self.mtp_stream.len() + saved + self.tokens.len()
    }

    /// The most `floats` a sequence of up to `tokens` positions holds between passes (projections of open windows, the MTP stream, the token look-back).
    pub fn max_floats(config: &(impl CacheGeometry + ?Sized), tokens: usize) -> usize {
        let (hd, ihd) = (config.head_dim(), config.index_head_dim());
        let layers = (0..config.num_main_layers() + config.num_mtp_layers()).map(|i| {
            let ratio = config.owned_ratio(i);
            if ratio == 0 {
                return 0;
            }
            // After a pass a state keeps the open window, and an overlapping (ratio-4) one also the finished window before it, each row twice as wide.
            let (rows, wide) = if ratio == 4 { (2 * ratio - 1, 2) } else { (ratio - 1, 1) };
            let index = if config.has_index_compressor(i) { ihd } else { 0 };
            2 * rows * wide * (hd + index)
        });
        let stream = if config.num_mtp_layers() > 0 {
            config.stream_width()
        } else {
            0
        };
        let look_back = if config.keeps_tokens() { tokens } else { 0 };
        layers.sum::<usize>() + stream + look_back
    }

    /// The next position `stage` will process.
    pub fn position(&self, stage: Stage) -> u32 {
        match stage {
            Stage::Main => self.len,
            Stage::Mtp(i) => self.mtp_len[i],
        }
    }

    /// The layers `stage` runs.
    pub fn layer_range(stage: Stage, config: &(impl CacheGeometry + ?Sized)) -> Range<usize> {
        match stage {
            Stage::Main => 0..config.num_main_layers(),
            Stage::Mtp(i) => config.num_main_layers() + i..config.num_main_layers() + i + 1,
        }
    }
}

/// What a registered block keeps besides its floats: whether the MTP layers had caught up at its end (their window rows and input stream are then in the block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Boundary {
    pub mtp_synced: bool,
}

/// Blocks that hold the state of positions below `end`.
pub fn blocks_for(end: usize) -> usize {
    end.div_ceil(BLOCK_TOKENS)
}

/// Every sequence's state, owned by whoever drives the forward pass (the engine).
#[derive(Clone, Debug, Default)]
pub struct Dsv4Cache {
    pub seqs: BTreeMap<SeqSlot, SeqCache>,
    /// Each sequence's blocks: block i holds its state for positions `[128 i, 128 (i + 1))`.
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

    /// Writes each group's rows of `kv` (`width` floats a row) into layer `layer`'s window rows of its blocks.
    pub fn put_window_rows(
        &mut self,
        layout: &BlockLayout,
        layer: usize,
        groups: &[SeqRows],
        kv: &[f32],
        width: usize,
    ) {
        let section = layout.window(layer);
        for g in groups {
            for (i, &r) in g.rows.iter().enumerate() {
                let q = layout.window_pos(layer, g.start as usize + i);
                let value = &kv[r * width..(r + 1) * width];
                self.store
                    .put_row(&self.tables[&g.seq], section, q, value, layout.floats);
            }
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

    /// Remembers what running up to `rows` more rows of `seq` through `stage` overwrites, so `settle` can return to any length in between; the owner gives the rows' blocks first.
    pub fn mark(
        &mut self,
        seq: SeqSlot,
        stage: Stage,
        rows: usize,
        config: &(impl CacheGeometry + ?Sized),
        layout: &BlockLayout,
    ) {
        let window = config.sliding_window();
        assert!(rows <= window, "{rows} marked rows overrun the {window}-row window");
        let start = self.seq_mut(seq, config).position(stage) as usize;
        let layers = SeqCache::layer_range(stage, config);
        self.cover(seq, layout.window_pos(layers.start, start + rows))
            .expect("a marked sequence holds blocks for its rows");
        let Dsv4Cache { seqs, tables, store } = self;
        let state = seqs.get_mut(&seq).expect("a marked sequence has state");
        assert!(state.mark.is_none(), "a sequence holds one mark at a time");
        let mut saved = Vec::new();
        for l in layers {
            let layer = &mut state.layers[l];
            for st in [&mut layer.compressor, &mut layer.indexer].into_iter().flatten() {
                st.pinned = true;
            }
            let mut rows_before = Vec::with_capacity(rows * config.head_dim());
            for p in start..start + rows {
                let q = layout.window_pos(l, p);
                rows_before.extend_from_slice(store.row_or_alloc(&tables[&seq], layout.window(l), q, layout.floats));
            }
            saved.push(rows_before);
        }
        state.mark = Some(Mark {
            stage,
            start: start as u32,
            window: saved,
        });
    }

    /// Keeps the marked stage's first `len` positions of `seq` and undoes the rest exactly, as if they never ran; drops the mark.
    pub fn settle(&mut self, seq: SeqSlot, len: u32, config: &(impl CacheGeometry + ?Sized), layout: &BlockLayout) {
        let Dsv4Cache { seqs, tables, store } = self;
        let state = seqs.get_mut(&seq).expect("a marked sequence has state");
        let mark = state.mark.take().expect("settle needs a mark");
        let now = state.position(mark.stage);
        assert!(
            mark.start <= len && len <= now,
            "settle to {len} outside the marked rows {}..{now}",
            mark.start
        );
        let hd = config.head_dim();
        for (l, saved) in SeqCache::layer_range(mark.stage, config).zip(&mark.window) {
            for p in len..now {
                let (q, i) = (layout.window_pos(l, p as usize), (p - mark.start) as usize);
                store.put_row(
                    &tables[&seq],
                    layout.window(l),
                    q,
                    &saved[i * hd..(i + 1) * hd],
                    layout.floats,
                );
            }
            let ratio = config.owned_ratio(l);
            let layer = &mut state.layers[l];
            for st in [&mut layer.compressor, &mut layer.indexer].into_iter().flatten() {
                st.truncate(now, len, ratio);
            }
        }
        match mark.stage {
            Stage::Main => {
                state.len = len;
                state.tokens.truncate(len as usize);
            }
            Stage::Mtp(i) => state.mtp_len[i] = len,
        }
    }

    /// The window rows layer `layer_idx` of `seq` reads before its next position, oldest first.
    pub fn window_rows(
        &self,
        seq: SeqSlot,
        layer_idx: usize,
        config: &(impl CacheGeometry + ?Sized),
        layout: &BlockLayout,
    ) -> Vec<f32> {
        let state = &self.seqs[&seq];
        let main = config.num_main_layers();
        let pos = if layer_idx < main {
            state.len
        } else {
            state.mtp_len[layer_idx - main]
        } as usize;
        let first = pos.saturating_sub(config.sliding_window() - 1);
        let s = layout.window(layer_idx);
        (first..pos)
            .flat_map(|p| {
                self.store
                    .row(self.table(seq), s, layout.window_pos(layer_idx, p))
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// Writes what `seq` carries past the block boundary it stands at into its last block (compressor tails, the MTP stream), so the block alone resumes it.
    pub fn capture(&mut self, seq: SeqSlot, config: &(impl CacheGeometry + ?Sized), layout: &BlockLayout) -> Boundary {
        let Dsv4Cache { seqs, tables, store } = self;
        let state = &seqs[&seq];
        let len = state.len as usize;
        assert!(
            len > 0 && len.is_multiple_of(BLOCK_TOKENS) && state.mark.is_none(),
            "a boundary is captured at a block's end, with no rows marked"
        );
        let block = tables[&seq][len / BLOCK_TOKENS - 1];
        for (l, layer) in state.layers.iter().enumerate() {
            for (kind, st) in [(EntryKind::Kv, &layer.compressor), (EntryKind::Index, &layer.indexer)] {
                let (Some(s), Some(st)) = (layout.tail(l, kind), st) else {
                    continue;
                };
                assert_eq!(
                    st.first_pos as usize,
                    len - s.per_block / 2,
                    "layer {l} carries its tail"
                );
                let part = store.part_mut(block, s, layout.floats);
                let (kv, gate) = part.split_at_mut(part.len() / 2);
                kv.copy_from_slice(&st.kv);
                gate.copy_from_slice(&st.gate);
            }
        }
        let main = config.num_main_layers();
        let mtp_synced = match layout.mtp_stream {
            Some(s) => {
                let synced = state.mtp_len.iter().all(|&m| m as usize + 1 == len)
                    && state.layers[main..].iter().all(|l| l.compressor.is_none())
                    && state.mtp_stream.len() == s.width;
                if synced {
                    store
                        .part_mut(block, s, layout.floats)
                        .copy_from_slice(&state.mtp_stream);
                }
                synced
            }
            None => false,
        };
        Boundary { mtp_synced }
    }

    /// Makes `seq` resume after the blocks of `table` (whole blocks, the last one captured), as if it had run their tokens itself.
    pub fn resume(
        &mut self,
        seq: SeqSlot,
        table: Vec<BlockId>,
        boundary: Boundary,
        config: &(impl CacheGeometry + ?Sized),
        layout: &BlockLayout,
    ) {
        let len = table.len() * BLOCK_TOKENS;
        let block = *table.last().expect("a resume point follows at least one block");
        let mut state = SeqCache::new(config);
        state.len = len as u32;
        for (l, layer) in state.layers.iter_mut().enumerate().take(config.num_main_layers()) {
            let ratio = config.owned_ratio(l);
            for (kind, st) in [
                (EntryKind::Kv, &mut layer.compressor),
                (EntryKind::Index, &mut layer.indexer),
            ] {
                let Some(st) = st else { continue };
                st.num_entries = len / ratio;
                st.first_pos = CompressorState::keep_from(len as u32, ratio);
                if let Some(s) = layout.tail(l, kind) {
                    let (kv, gate) = self.store.part(block, s).split_at(s.per_block / 2 * s.width);
                    st.kv = kv.to_vec();
                    st.gate = gate.to_vec();
                }
            }
        }
        if let (true, Some(s)) = (boundary.mtp_synced, layout.mtp_stream) {
            state.mtp_len.iter_mut().for_each(|m| *m = len as u32 - 1);
            state.mtp_stream = self.store.part(block, s).to_vec();
        }
        if let Some(s) = layout.tokens {
            let ids = table
                .iter()
                .flat_map(|&b| self.store.part(b, s).iter().map(|t| t.to_bits()));
            state.tokens = ids.collect();
        }
        self.seqs.insert(seq, state);
        self.tables.insert(seq, table);
    }
}
