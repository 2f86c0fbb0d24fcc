//! Parameter counts, bytes by format and cache memory of a DeepSeek V4 model, from its config.

use std::collections::BTreeMap;

use crate::config::dsv4::Dsv4Config;
use crate::dtype::DType;
use crate::manifest::TensorSpec;

/// Bytes per cached value: entries are held in bf16 (the FP8/FP4 round-tripped values are exact in it).
const CACHE_VALUE_BYTES: u64 = 2;
/// Bytes per value of compressor running state (f32).
const STATE_VALUE_BYTES: u64 = 4;

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

/// Per-sequence cache bytes at one context length.
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

    /// Cache bytes one sequence of `context` tokens needs across all layers, MTP included.
    pub fn kv_bytes(config: &Dsv4Config, context: u64) -> KvBytes {
        let c = config;
        let hd = c.head_dim as u64;
        let mut kv = KvBytes::default();
        for &ratio in &c.compress_ratios {
            kv.window += context.min(c.sliding_window as u64) * hd * CACHE_VALUE_BYTES;
            if ratio == 0 {
                continue;
            }
            let ratio = ratio as u64;
            kv.compressed += context / ratio * hd * CACHE_VALUE_BYTES;
            let (width, slots) = if ratio == 4 { (2 * hd, 2 * ratio) } else { (hd, ratio) };
            kv.compressor_state += slots * 2 * width * STATE_VALUE_BYTES;
            if ratio == 4 {
                let ihd = c.index_head_dim as u64;
                kv.indexer += context / 4 * ihd * CACHE_VALUE_BYTES;
                kv.compressor_state += 2 * ratio * 2 * 2 * ihd * STATE_VALUE_BYTES;
            }
        }
        kv
    }
}
