//! The DeepSeek V4 `config.json` (V4-Flash, V4-Pro and the synth presets), as the hub ships it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CheckpointError;

/// `model_type` of DeepSeek V4 checkpoints.
pub const MODEL_TYPE: &str = "deepseek_v4";

/// YaRN settings applied to the compressed layers' RoPE.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    #[serde(rename = "type")]
    pub kind: String,
    pub factor: f64,
    pub original_max_position_embeddings: usize,
    pub beta_fast: f64,
    pub beta_slow: f64,
}

/// FP8 block quantization of the dense weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantizationConfig {
    pub quant_method: String,
    pub fmt: String,
    pub activation_scheme: String,
    pub weight_block_size: [usize; 2],
    pub scale_fmt: String,
}

/// Every field of a DeepSeek V4 `config.json` that the engine reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dsv4Config {
    #[serde(default)]
    pub architectures: Vec<String>,
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub qk_rope_head_dim: usize,
    pub q_lora_rank: usize,
    pub o_lora_rank: usize,
    pub o_groups: usize,
    pub n_routed_experts: usize,
    pub num_experts_per_tok: usize,
    pub n_shared_experts: usize,
    pub moe_intermediate_size: usize,
    pub scoring_func: String,
    pub topk_method: String,
    pub norm_topk_prob: bool,
    pub routed_scaling_factor: f64,
    pub num_hash_layers: usize,
    pub swiglu_limit: f64,
    pub sliding_window: usize,
    pub index_n_heads: usize,
    pub index_head_dim: usize,
    pub index_topk: usize,
    pub hc_mult: usize,
    pub hc_sinkhorn_iters: usize,
    pub hc_eps: f64,
    pub bos_token_id: u32,
    pub eos_token_id: u32,
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub num_nextn_predict_layers: usize,
    pub rope_theta: f64,
    pub compress_rope_theta: f64,
    pub rope_scaling: RopeScaling,
    pub compress_ratios: Vec<usize>,
    pub expert_dtype: String,
    pub quantization_config: QuantizationConfig,
    #[serde(default)]
    pub tie_word_embeddings: bool,
}

impl Dsv4Config {
    /// Reads and checks `dir/config.json`.
    pub fn read(dir: &Path) -> Result<Dsv4Config, CheckpointError> {
        let config: Dsv4Config = super::read(dir)?;
        config.validate(&dir.join(super::CONFIG_FILE))?;
        Ok(config)
    }

    /// Parses and checks config text; `path` is used in errors only.
    pub fn parse(path: &Path, text: &str) -> Result<Dsv4Config, CheckpointError> {
        let config: Dsv4Config = super::parse_json(path, text)?;
        config.validate(path)?;
        Ok(config)
    }

    /// Compress ratio of main layer `layer_idx` (0 = sliding window only).
    pub fn compress_ratio(&self, layer_idx: usize) -> usize {
        self.compress_ratios[layer_idx]
    }

    /// Whether main layer `layer_idx` routes by token-id hash.
    pub fn is_hash_layer(&self, layer_idx: usize) -> bool {
        layer_idx < self.num_hash_layers
    }

    /// Dimensions of the head that carry no RoPE.
    pub fn nope_head_dim(&self) -> usize {
        self.head_dim - self.qk_rope_head_dim
    }

    /// Checks the relations between fields that the forward pass relies on.
    pub fn validate(&self, path: &Path) -> Result<(), CheckpointError> {
        let fail = |field: &str, reason: String| {
            Err(CheckpointError::Config {
                path: PathBuf::from(path),
                field: field.to_string(),
                reason,
            })
        };
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("head_dim", self.head_dim),
            ("q_lora_rank", self.q_lora_rank),
            ("o_lora_rank", self.o_lora_rank),
            ("o_groups", self.o_groups),
            ("n_routed_experts", self.n_routed_experts),
            ("num_experts_per_tok", self.num_experts_per_tok),
            ("moe_intermediate_size", self.moe_intermediate_size),
            ("sliding_window", self.sliding_window),
            ("index_n_heads", self.index_n_heads),
            ("index_topk", self.index_topk),
            ("hc_mult", self.hc_mult),
            ("hc_sinkhorn_iters", self.hc_sinkhorn_iters),
        ];
        for (field, value) in positive {
            if value == 0 {
                return fail(field, "must be at least 1".into());
            }
        }
        let block = crate::dsv4::blocks::BLOCK_TOKENS;
        if self.sliding_window > block {
            return fail(
                "sliding_window",
                format!(
                    "is {}, the cache keeps a window within one block of {block} tokens",
                    self.sliding_window
                ),
            );
        }
        if self.model_type != MODEL_TYPE {
            return fail(
                "model_type",
                format!(
                    "is `{}`, expected `{MODEL_TYPE}`; this checkpoint is not DeepSeek V4",
                    self.model_type
                ),
            );
        }
        if self.num_key_value_heads != 1 {
            return fail(
                "num_key_value_heads",
                format!("is {}, DeepSeek V4 shares one KV head", self.num_key_value_heads),
            );
        }
        if !self.qk_rope_head_dim.is_multiple_of(2) || self.qk_rope_head_dim >= self.head_dim {
            return fail(
                "qk_rope_head_dim",
                format!(
                    "is {}, must be even and below head_dim {}",
                    self.qk_rope_head_dim, self.head_dim
                ),
            );
        }
        if self.qk_rope_head_dim >= self.index_head_dim {
            return fail(
                "index_head_dim",
                format!(
                    "is {}, must exceed qk_rope_head_dim {}",
                    self.index_head_dim, self.qk_rope_head_dim
                ),
            );
        }
        if !self.index_head_dim.is_power_of_two() {
            return fail(
                "index_head_dim",
                format!("is {}, the Hadamard rotation needs a power of two", self.index_head_dim),
            );
        }
        if !self.num_attention_heads.is_multiple_of(self.o_groups) {
            return fail(
                "o_groups",
                format!(
                    "is {}, must divide num_attention_heads {}",
                    self.o_groups, self.num_attention_heads
                ),
            );
        }
        if self.num_experts_per_tok > self.n_routed_experts {
            return fail(
                "num_experts_per_tok",
                format!(
                    "is {}, more than n_routed_experts {}",
                    self.num_experts_per_tok, self.n_routed_experts
                ),
            );
        }
        if self.n_shared_experts > 1 {
            return fail(
                "n_shared_experts",
                format!("is {}, DeepSeek V4 has at most one", self.n_shared_experts),
            );
        }
        if self.num_hash_layers > self.num_hidden_layers {
            return fail(
                "num_hash_layers",
                format!(
                    "is {}, more than num_hidden_layers {}",
                    self.num_hash_layers, self.num_hidden_layers
                ),
            );
        }
        let want = self.num_hidden_layers + self.num_nextn_predict_layers;
        if self.compress_ratios.len() != want {
            return fail(
                "compress_ratios",
                format!(
                    "has {} entries, expected num_hidden_layers + num_nextn_predict_layers = {want}",
                    self.compress_ratios.len()
                ),
            );
        }
        if let Some((i, r)) = self
            .compress_ratios
            .iter()
            .enumerate()
            .find(|(_, r)| ![0, 4, 128].contains(*r))
        {
            return fail("compress_ratios", format!("entry {i} is {r}, expected 0, 4 or 128"));
        }
        if self.bos_token_id as usize >= self.vocab_size || self.eos_token_id as usize >= self.vocab_size {
            return fail(
                "eos_token_id",
                format!("bos/eos ids must be below vocab_size {}", self.vocab_size),
            );
        }
        let checks = [
            ("scoring_func", self.scoring_func.as_str(), "sqrtsoftplus"),
            ("expert_dtype", self.expert_dtype.as_str(), "fp4"),
            ("rope_scaling.type", self.rope_scaling.kind.as_str(), "yarn"),
            ("quantization_config.fmt", self.quantization_config.fmt.as_str(), "e4m3"),
            (
                "quantization_config.scale_fmt",
                self.quantization_config.scale_fmt.as_str(),
                "ue8m0",
            ),
        ];
        for (field, found, want) in checks {
            if found != want {
                return fail(
                    field,
                    format!("is `{found}`, this engine reads DeepSeek V4 with `{want}`"),
                );
            }
        }
        if self.quantization_config.weight_block_size != [128, 128] {
            return fail(
                "quantization_config.weight_block_size",
                format!(
                    "is {:?}, expected [128, 128]",
                    self.quantization_config.weight_block_size
                ),
            );
        }
        Ok(())
    }
}
