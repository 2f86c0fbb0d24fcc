//! Fixed-size blocks holding the finished compressed KV entries and indexer keys of 128 tokens of one sequence, every layer.

use super::cache::CacheGeometry;

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

/// Where one compressor's entries sit in every block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// First float of the section.
    pub offset: usize,
    /// Entries a block holds (`BLOCK_TOKENS / ratio`).
    pub per_block: usize,
    /// Floats per entry.
    pub width: usize,
}

/// The sections of every layer's compressors in a block, and the block's size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    /// Per layer (main layers, then MTP layers): compressed KV, then indexer keys.
    sections: Vec<[Option<Section>; 2]>,
    /// Floats per block.
    pub floats: usize,
}

impl BlockLayout {
    /// The layout for `config`: per layer in turn, the KV entries of the compressor it owns, then its index keys.
    pub fn new(config: &(impl CacheGeometry + ?Sized)) -> BlockLayout {
        let mut floats = 0;
        let mut section = |per_block: usize, width: usize| {
            let s = Section {
                offset: floats,
                per_block,
                width,
            };
            floats += per_block * width;
            Some(s)
        };
        let sections = (0..config.num_main_layers() + config.num_mtp_layers())
            .map(|i| match config.owned_ratio(i) {
                0 => [None, None],
                ratio => {
                    assert!(
                        BLOCK_TOKENS.is_multiple_of(ratio),
                        "compress ratio {ratio} does not divide the block of {BLOCK_TOKENS} tokens"
                    );
                    let kv = section(BLOCK_TOKENS / ratio, config.head_dim());
                    let index = config
                        .owns_index_keys(i)
                        .then(|| section(BLOCK_TOKENS / ratio, config.index_head_dim()));
                    [kv, index.flatten()]
                }
            })
            .collect();
        BlockLayout { sections, floats }
    }

    /// Whether any of `layers` keeps entries in blocks (an MTP layer with ratio 0 keeps none).
    pub fn has_entries(&self, layers: std::ops::Range<usize>) -> bool {
        self.sections[layers].iter().flatten().any(Option::is_some)
    }

    /// The section of layer `layer_idx`'s compressor of `kind`.
    pub fn section(&self, layer_idx: usize, kind: EntryKind) -> Section {
        self.sections[layer_idx][kind as usize].expect("a compressed layer has a section for its compressor")
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
        assert_eq!(l.floats, 2 * 32 * (hd + ihd) + hd);
        assert!(l.has_entries(0..4), "the main layers keep entries");
        assert!(!l.has_entries(4..5), "the MTP layer has a window only");
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
