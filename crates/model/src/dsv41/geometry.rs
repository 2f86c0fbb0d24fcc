//! The per-sequence state a V4.1 model keeps: a window per layer and per DSpark ring, a compressor per KV source, index keys per key owner, token ids for Engram.

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

    /// The main layers, then one ring per DSpark stage: the main pass writes the rings at its own positions, so a mark of the main layers covers them.
    fn num_main_layers(&self) -> usize {
        self.num_hidden_layers + self.num_nextn_predict_layers
    }

    /// The DSpark stages keep no position of their own (their rings follow the main layers).
    fn num_mtp_layers(&self) -> usize {
        0
    }

    fn owned_ratio(&self, layer_idx: usize) -> usize {
        if layer_idx < self.num_hidden_layers && self.is_kv_source(layer_idx) {
            self.compress_ratio(layer_idx)
        } else {
            0
        }
    }

    fn owns_index_keys(&self, layer_idx: usize) -> bool {
        layer_idx < self.num_hidden_layers && Dsv41TextConfig::owns_index_keys(self, layer_idx)
    }

    fn has_index_compressor(&self, _layer_idx: usize) -> bool {
        false
    }

    fn stream_width(&self) -> usize {
        self.hc_mult * self.hidden_size
    }

    fn keeps_tokens(&self) -> bool {
        !self.engram_layer_ids.is_empty()
    }
}
