//! Parameter counts, bytes by format and cache memory of a DeepSeek V4 model, from its config.

use std::collections::BTreeMap;

use super::blocks::{BLOCK_TOKENS, tail_rows};
use super::cache::{CacheGeometry, SeqCache, blocks_for};
use crate::config::dsv4::Dsv4Config;
use crate::dtype::DType;
use crate::manifest::TensorSpec;

/// Sizes of one model.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Parameters of the main model (embedding and head included, MTP excluded).
    pub total_params: u64,
    /// Parameters one token touches in the main model: all but the unselected routed experts.
    pub active_params: u64,
    /// Parameters of the MTP layers.
    pub mtp_params: u64,
    /// Checkpoint bytes by dtype.
    pub bytes_by_dtype: BTreeMap<DType, u64>,
}

/// Per-sequence cache bytes at one context length: window rings, compressed entries, index keys, and compressor state with the MTP stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvBytes {
    pub window: u64,
    pub compressed: u64,
    pub indexer: u64,
    pub compressor_state: u64,
}

impl KvBytes {
    pub fn total(&self) -> u64 {
        self.window + self.compressed + self.indexer + self.compressor_state
    }
}

/// Logical parameters held by a tensor: packed FP4 counts two per byte; scales and index tables count none.
fn params_of(spec: &TensorSpec) -> u64 {
    if spec.name.ends_with(".scale") || spec.name.ends_with(".tid2eid") {
        0
    } else if spec.dtype == DType::I8 {
        2 * spec.numel() as u64
    } else {
        spec.numel() as u64
    }
}

impl Summary {
    /// Counts parameters and bytes over the manifest of `config`.
    pub fn of(config: &Dsv4Config) -> Summary {
        let mut s = Summary::default();
        let mut routed = 0u64;
        for spec in super::manifest(config).specs {
            *s.bytes_by_dtype.entry(spec.dtype).or_default() += spec.num_bytes() as u64;
            let params = params_of(&spec);
            if spec.name.starts_with("mtp.") {
                s.mtp_params += params;
                continue;
            }
            s.total_params += params;
            if spec.name.contains(".ffn.experts.") {
                routed += params;
            }
        }
        let active_routed = routed * config.num_experts_per_tok as u64 / config.n_routed_experts as u64;
        s.active_params = s.total_params - routed + active_routed;
        s
    }

    /// Checkpoint bytes in all.
    pub fn total_bytes(&self) -> u64 {
        self.bytes_by_dtype.values().sum()
    }

    /// Memory the engine takes for one sequence of `context` tokens, MTP layers included: its pool blocks (f32 values; every block keeps its own window ring so a prefix resumes from it alone) and the most state it keeps outside them.
    pub fn kv_bytes(config: &Dsv4Config, context: u64) -> KvBytes {
        let c = config;
        let (window, hd, ihd) = (c.sliding_window(), c.head_dim(), c.index_head_dim());
        let mut per_block = KvBytes::default();
        for i in 0..c.num_main_layers() + c.num_mtp_layers() {
            per_block.window += (window * hd) as u64;
            let ratio = c.owned_ratio(i);
            if ratio == 0 {
                continue;
            }
            per_block.compressed += (BLOCK_TOKENS / ratio * hd) as u64;
            if c.owns_index_keys(i) {
                per_block.indexer += (BLOCK_TOKENS / ratio * ihd) as u64;
            }
            let rows = if i < c.num_main_layers() { tail_rows(ratio) } else { 0 };
            let index = if c.has_index_compressor(i) { ihd } else { 0 };
            per_block.compressor_state += (2 * rows * 2 * (hd + index)) as u64;
        }
        if c.num_mtp_layers() > 0 {
            per_block.compressor_state += c.stream_width() as u64;
        }
        let (blocks, f32_bytes) = (blocks_for(context as usize) as u64, size_of::<f32>() as u64);
        let outside = SeqCache::max_floats(c, context as usize) as u64;
        KvBytes {
            window: per_block.window * blocks * f32_bytes,
            compressed: per_block.compressed * blocks * f32_bytes,
            indexer: per_block.indexer * blocks * f32_bytes,
            compressor_state: (per_block.compressor_state * blocks + outside) * f32_bytes,
        }
    }
}
