//! The per-sequence state a V4.1 model keeps: a window per layer, a compressor per KV source, index keys per key owner, token ids for Engram.

use crate::config::dsv41::Dsv41TextConfig;
use crate::dsv4::cache::CacheGeometry;

impl CacheGeometry for Dsv41TextConfig {
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

    /// The DSpark stages are not run yet, so they keep no state.
    fn num_mtp_layers(&self) -> usize {
        0
    }

    fn owned_ratio(&self, layer_idx: usize) -> usize {
        if self.is_kv_source(layer_idx) {
            self.compress_ratio(layer_idx)
        } else {
            0
        }
    }

    fn owns_index_keys(&self, layer_idx: usize) -> bool {
        Dsv41TextConfig::owns_index_keys(self, layer_idx)
    }

    fn has_index_compressor(&self, _layer_idx: usize) -> bool {
        false
    }
}
