//! Fixed-size blocks holding everything a sequence keeps for 128 of its tokens, every layer: window KV rows, finished compressed KV entries and indexer keys, and what a boundary carries on.

use super::cache::{CacheGeometry, CompressorState};

/// Tokens per block; a multiple of every compress ratio (4 and 128), so no compression window spans a boundary.
pub const BLOCK_TOKENS: usize = 128;

/// A block's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

/// Which of a layer's compressors an entry comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// Compressed attention KV entries.
    Kv,
    /// Indexer keys.
    Index,
}

/// Where one part of a layer's state sits in every block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// First float of the section.
    pub offset: usize,
    /// Rows a block holds (`BLOCK_TOKENS / ratio` entries, `sliding_window` window rows).
    pub per_block: usize,
    /// Floats per row.
    pub width: usize,
}

/// The sections of every layer in a block, and the block's size: everything a sequence keeps for the block's 128 tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    /// Per layer (main layers, then MTP layers): compressed KV, then indexer keys.
    sections: Vec<[Option<Section>; 2]>,
    /// Per layer: the window ring; position p sits at row `p % sliding_window` of the block of p.
    windows: Vec<Section>,
    /// Per main layer: the projections an overlapping compressor carries past the block's end (kv rows, then gate rows).
    tails: Vec<[Option<Section>; 2]>,
    /// The main layers' output streams at the block's last position, which the MTP layer runs after the boundary.
    pub mtp_stream: Option<Section>,
    /// The token ids of the block's positions (as f32 bits), when the family looks back at them.
    pub tokens: Option<Section>,
    num_main: usize,
    /// Floats per block.
    pub floats: usize,
}

/// Rows of projections a compressor of `ratio` still needs at a block boundary (the previous window of an overlapping one).
pub fn tail_rows(ratio: usize) -> usize {
    match ratio {
        0 => 0,
        _ => BLOCK_TOKENS - CompressorState::keep_from(BLOCK_TOKENS as u32, ratio) as usize,
    }
}

impl BlockLayout {
    /// The layout for `config`: every compressed layer's KV entries and index keys, then every layer's window, then the compressor tails, the MTP stream and the token ids.
    pub fn new(config: &(impl CacheGeometry + ?Sized)) -> BlockLayout {
        let (window, hd, ihd) = (config.sliding_window(), config.head_dim(), config.index_head_dim());
        let main = config.num_main_layers();
        assert!(
            window <= BLOCK_TOKENS,
            "a sliding window of {window} tokens spans more than one block of {BLOCK_TOKENS}"
        );
        let mut floats = 0;
        let mut section = |per_block: usize, width: usize| {
            let s = Section {
                offset: floats,
                per_block,
                width,
            };
            floats += per_block * width;
            s
        };
        let layers = 0..main + config.num_mtp_layers();
        let sections = layers
            .clone()
            .map(|i| match config.owned_ratio(i) {
                0 => [None, None],
                ratio => {
                    assert!(
                        BLOCK_TOKENS.is_multiple_of(ratio),
                        "compress ratio {ratio} does not divide the block of {BLOCK_TOKENS} tokens"
                    );
                    let kv = section(BLOCK_TOKENS / ratio, hd);
                    let index = config.owns_index_keys(i).then(|| section(BLOCK_TOKENS / ratio, ihd));
                    [Some(kv), index]
                }
            })
            .collect();
        let windows = layers.clone().map(|_| section(window, hd)).collect();
        let tails = layers
            .map(|i| {
                // MTP layers run one position behind the boundary, so only main layers carry tails across it.
                let ratio = if i < main { config.owned_ratio(i) } else { 0 };
                let rows = tail_rows(ratio);
                // Only an overlapping compressor (ratio 4) carries rows, projected to twice the head dim (previous and current window halves).
                let kv = (rows > 0).then(|| section(2 * rows, 2 * hd));
                let index = (rows > 0 && config.has_index_compressor(i)).then(|| section(2 * rows, 2 * ihd));
                [kv, index]
            })
            .collect();
        let mtp_stream = (config.num_mtp_layers() > 0).then(|| section(1, config.stream_width()));
        let tokens = config.keeps_tokens().then(|| section(BLOCK_TOKENS, 1));
        BlockLayout {
            sections,
            windows,
            tails,
            mtp_stream,
            tokens,
            num_main: main,
            floats,
        }
    }

    /// Bytes per block.
    pub fn bytes(&self) -> usize {
        self.floats * std::mem::size_of::<f32>()
    }

    /// Blocks that fit in `bytes` of memory.
    pub fn blocks_in(&self, bytes: u64) -> usize {
        usize::try_from(bytes / self.bytes() as u64).unwrap_or(usize::MAX)
    }

    /// The section of layer `layer_idx`'s compressor of `kind`.
    pub fn section(&self, layer_idx: usize, kind: EntryKind) -> Section {
        self.sections[layer_idx][kind as usize].expect("a compressed layer has a section for its compressor")
    }

    /// The window ring of layer `layer_idx`.
    pub fn window(&self, layer_idx: usize) -> Section {
        self.windows[layer_idx]
    }

    /// Where layer `layer_idx` keeps the window row of position p: p, or p + 1 for an MTP layer (its row at p joins token p + 1, so it belongs with that token's block).
    pub fn window_pos(&self, layer_idx: usize, pos: usize) -> usize {
        pos + usize::from(layer_idx >= self.num_main)
    }

    /// The tail of layer `layer_idx`'s compressor of `kind`, when it carries one past a boundary.
    pub fn tail(&self, layer_idx: usize, kind: EntryKind) -> Option<Section> {
        self.tails[layer_idx][kind as usize]
    }
}

/// The blocks' data, by id; a block's floats are allocated when first written and kept for reuse.
#[derive(Clone, Debug, Default)]
pub struct BlockStore {
    data: Vec<Vec<f32>>,
    /// Whether an owner (the engine) hands out blocks; otherwise a pass takes the blocks it needs itself.
    managed: bool,
    /// Blocks given back by removed sequences, when not managed.
    spare: Vec<BlockId>,
}

impl BlockStore {
    /// A store whose blocks an owner allocates, reference counts and frees.
    pub fn managed() -> BlockStore {
        BlockStore {
            managed: true,
            ..Default::default()
        }
    }

    pub fn is_managed(&self) -> bool {
        self.managed
    }

    /// A block for a pass of a store that is not managed.
    pub(crate) fn take(&mut self) -> BlockId {
        self.spare.pop().unwrap_or_else(|| {
            self.data.push(Vec::new());
            BlockId(self.data.len() as u32 - 1)
        })
    }

    /// Takes back the blocks of a removed sequence, when not managed.
    pub(crate) fn give_back(&mut self, blocks: Vec<BlockId>) {
        self.spare.extend(blocks);
    }

    /// Frees a block's memory (the owner lent the block to state kept outside the pool); a later write allocates it again.
    pub fn drop_block(&mut self, id: BlockId) {
        if let Some(d) = self.data.get_mut(id.0 as usize) {
            *d = Vec::new();
        }
    }

    /// Floats the store's blocks take.
    pub fn allocated_floats(&self) -> usize {
        self.data.iter().map(Vec::len).sum()
    }

    fn block_mut(&mut self, id: BlockId, floats: usize) -> &mut [f32] {
        let i = id.0 as usize;
        if self.data.len() <= i {
            self.data.resize_with(i + 1, Vec::new);
        }
        let d = &mut self.data[i];
        if d.len() < floats {
            d.resize(floats, 0.0);
        }
        d
    }

    /// Makes `dst` a copy of `src` (copy-on-write of a shared block).
    pub fn copy(&mut self, src: BlockId, dst: BlockId) {
        let data = self.data.get(src.0 as usize).cloned().unwrap_or_default();
        let n = data.len();
        self.block_mut(dst, n).copy_from_slice(&data);
    }

    /// Writes entry `entry` of `section` into its block of `table`.
    pub fn put(&mut self, table: &[BlockId], s: Section, entry: usize, value: &[f32], floats: usize) {
        debug_assert_eq!(value.len(), s.width);
        let block = self.block_mut(table[entry / s.per_block], floats);
        let at = s.offset + (entry % s.per_block) * s.width;
        block[at..at + s.width].copy_from_slice(value);
    }

    /// Writes the window row of (window) position `pos` into its block of `table`.
    pub fn put_row(&mut self, table: &[BlockId], s: Section, pos: usize, value: &[f32], floats: usize) {
        debug_assert_eq!(value.len(), s.width);
        let block = self.block_mut(table[pos / BLOCK_TOKENS], floats);
        let at = s.offset + (pos % s.per_block) * s.width;
        block[at..at + s.width].copy_from_slice(value);
    }

    /// The window row of (window) position `pos` from its block of `table`.
    pub fn row(&self, table: &[BlockId], s: Section, pos: usize) -> &[f32] {
        let at = s.offset + (pos % s.per_block) * s.width;
        &self.data[table[pos / BLOCK_TOKENS].0 as usize][at..at + s.width]
    }

    /// `row` for a block that may not have been written yet (its floats are allocated first).
    pub fn row_or_alloc(&mut self, table: &[BlockId], s: Section, pos: usize, floats: usize) -> &[f32] {
        let block = self.block_mut(table[pos / BLOCK_TOKENS], floats);
        let at = s.offset + (pos % s.per_block) * s.width;
        &block[at..at + s.width]
    }

    /// The whole of `section` in block `id`.
    pub fn part(&self, id: BlockId, s: Section) -> &[f32] {
        &self.data[id.0 as usize][s.offset..s.offset + s.per_block * s.width]
    }

    /// The whole of `section` in block `id`, to write.
    pub fn part_mut(&mut self, id: BlockId, s: Section, floats: usize) -> &mut [f32] {
        &mut self.block_mut(id, floats)[s.offset..s.offset + s.per_block * s.width]
    }

    /// Floats held by the store's blocks (allocated when first written).
    pub fn floats_held(&self) -> usize {
        self.data.iter().map(Vec::len).sum()
    }

    /// Appends the first `count` entries of `section` from the blocks of `table` to `out`.
    pub fn gather(&self, table: &[BlockId], s: Section, count: usize, out: &mut Vec<f32>) {
        for (b, id) in table.iter().enumerate() {
            let first = b * s.per_block;
            if first >= count {
                break;
            }
            let n = (count - first).min(s.per_block);
            out.extend_from_slice(&self.data[id.0 as usize][s.offset..s.offset + n * s.width]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Preset;

    #[test]
    fn tiny_blocks_hold_each_compressed_layer_in_turn() {
        let c = Preset::Tiny.config();
        assert_eq!(c.compress_ratios, [0, 4, 128, 4, 0]);
        let l = BlockLayout::new(&c);
        let (hd, ihd) = (c.head_dim, c.index_head_dim);
        assert_eq!(
            l.section(1, EntryKind::Kv),
            Section {
                offset: 0,
                per_block: 32,
                width: hd
            }
        );
        assert_eq!(l.section(1, EntryKind::Index).offset, 32 * hd);
        assert_eq!(
            l.section(2, EntryKind::Kv),
            Section {
                offset: 32 * (hd + ihd),
                per_block: 1,
                width: hd
            }
        );
        let entries = 2 * 32 * (hd + ihd) + hd;
        assert_eq!(l.window(0).offset, entries, "the windows follow the entries");
        assert_eq!(
            l.window(4).per_block,
            c.sliding_window,
            "the MTP layer keeps a window too"
        );
        let windows = 5 * c.sliding_window * hd;
        assert_eq!(
            l.tail(2, EntryKind::Kv),
            None,
            "a ratio-128 window never spans a boundary"
        );
        // Ratio-4 layers carry the kv and gate projections of the block's last 4 tokens, at twice the head dim.
        let tails = 2 * 2 * 4 * 2 * (hd + ihd);
        let stream = c.hc_mult * c.hidden_size;
        assert_eq!(l.floats, entries + windows + tails + stream);
        assert_eq!((tail_rows(4), tail_rows(128), tail_rows(0)), (4, 0, 0));
    }

    #[test]
    fn a_flash_block_holds_a_whole_window_of_every_layer() {
        let c = Preset::FlashLayers(43).config();
        let l = BlockLayout::new(&c);
        let (hd, ihd) = (c.head_dim, c.index_head_dim);
        let count = |r: usize| {
            c.compress_ratios[..c.num_hidden_layers]
                .iter()
                .filter(|&&x| x == r)
                .count()
        };
        let (csa, hca) = (count(4), count(128));
        assert_eq!((csa, hca, c.compress_ratios.len()), (21, 20, 44));
        let entries = csa * 32 * (hd + ihd) + hca * hd;
        let windows = 44 * BLOCK_TOKENS * hd;
        let tails = csa * 2 * 4 * 2 * (hd + ihd);
        assert_eq!(l.floats, entries + windows + tails + c.hc_mult * c.hidden_size);
        assert_eq!(l.window(43).per_block, BLOCK_TOKENS, "Flash's window is one block");
    }

    #[test]
    fn entries_round_trip_through_blocks_in_order() {
        let s = Section {
            offset: 3,
            per_block: 2,
            width: 2,
        };
        let mut store = BlockStore::default();
        let table = [store.take(), store.take(), store.take()];
        for e in 0..5 {
            store.put(&table, s, e, &[e as f32, -(e as f32)], 8);
        }
        let mut out = Vec::new();
        store.gather(&table, s, 5, &mut out);
        assert_eq!(out, [0., -0., 1., -1., 2., -2., 3., -3., 4., -4.]);
        out.clear();
        store.gather(&table, s, 3, &mut out);
        assert_eq!(out.len(), 6);
        let copy = store.take();
        store.copy(table[1], copy);
        out.clear();
        store.gather(&[table[0], copy], s, 4, &mut out);
        assert_eq!(out, [0., -0., 1., -1., 2., -2., 3., -3.]);
    }
}
