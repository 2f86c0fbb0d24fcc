//! The DeepSeek V4.1 `config.json`: the text model under `text_config`, FP8 32x32 quantization beside it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use super::dsv4::{QuantizationConfig, RopeScaling};
use crate::error::CheckpointError;

/// `model_type` of DeepSeek V4.1 checkpoints.
pub const MODEL_TYPE: &str = "deepseek_v41";

/// FP8 weight block edge of V4.1 (rows and columns).
pub const FP8_BLOCK: usize = 32;

/// A whole V4.1 `config.json`; the vision tower's settings are kept but not read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dsv41Config {
    #[serde(default)]
    pub architectures: Vec<String>,
    pub model_type: String,
    pub text_config: Dsv41TextConfig,
    pub quantization_config: QuantizationConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision_config: Option<serde_json::Value>,
}

/// Every field of the text model that the engine reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dsv41TextConfig {
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
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub rope_theta: f64,
    pub compress_rope_theta: f64,
    pub rope_scaling: RopeScaling,
    pub n_routed_experts: usize,
    pub n_shared_experts: usize,
    pub num_experts_per_tok: usize,
    pub moe_intermediate_size: usize,
    pub scoring_func: String,
    pub topk_method: String,
    pub norm_topk_prob: bool,
    pub routed_scaling_factor: f64,
    pub swiglu_limit: f64,
    pub expert_dtype: String,
    pub sliding_window: usize,
    /// One per main layer and DSpark stage: 0 window only, 1 or 2 compressed.
    pub compress_ratios: Vec<usize>,
    pub kv_source_layer_ids: Vec<usize>,
    pub index_source_layer_ids: Vec<usize>,
    pub index_n_heads: usize,
    pub index_head_dim: usize,
    pub index_topk: usize,
    pub candidate_source_layer_id: usize,
    pub candidate_topk_blocks: usize,
    pub candidate_block_size: usize,
    pub hc_mult: usize,
    pub hc_sinkhorn_iters: usize,
    pub hc_eps: f64,
    pub engram_layer_ids: Vec<usize>,
    /// Base table size per n-gram order 2..=max; each head's size is the next unused prime at or above it.
    pub engram_vocab_size: Vec<usize>,
    /// Rows of each Engram layer's table (the sum of its primes).
    pub engram_num_embeddings: Vec<u64>,
    pub engram_max_ngram_size: usize,
    pub engram_n_heads: usize,
    pub engram_head_dim: usize,
    pub engram_pad_id: u32,
    pub engram_compressed_vocab_size: usize,
    pub num_nextn_predict_layers: usize,
    pub dspark_block_size: usize,
    pub dspark_noise_token_id: u32,
    pub dspark_target_layer_ids: Vec<usize>,
    pub dspark_markov_rank: usize,
    pub dspark_n_routed_experts: usize,
    pub dspark_num_experts_per_tok: usize,
    pub bos_token_id: u32,
    pub eos_token_id: u32,
    pub pad_token_id: u32,
}

/// Which attention parts a main layer owns and which layers it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    pub ratio: usize,
    /// The layer whose compressed cache this layer reads (itself when it is a KV source).
    pub kv_source: Option<usize>,
    /// Whether this layer scores compressed entries itself (an index source).
    pub index_source: bool,
    /// The layer whose index keys this layer's indexer reads.
    pub key_owner: Option<usize>,
    /// The index source whose top-k this layer uses.
    pub topk_from: Option<usize>,
    /// Whether top-k is restricted to the candidate pool of `candidate_source_layer_id`.
    pub candidate_masked: bool,
}

impl Dsv41Config {
    /// Reads and checks `dir/config.json`.
    pub fn read(dir: &Path) -> Result<Dsv41Config, CheckpointError> {
        let config: Dsv41Config = super::read(dir)?;
        config.validate(&dir.join(super::CONFIG_FILE))?;
        Ok(config)
    }

    /// Parses and checks config text; `path` is used in errors only.
    pub fn parse(path: &Path, text: &str) -> Result<Dsv41Config, CheckpointError> {
        let config: Dsv41Config = super::parse_json(path, text)?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks the relations between fields that the forward pass relies on.
    pub fn validate(&self, path: &Path) -> Result<(), CheckpointError> {
        let fail = |field: &str, reason: String| CheckpointError::Config {
            path: PathBuf::from(path),
            field: field.to_string(),
            reason,
        };
        if self.model_type != MODEL_TYPE {
            return Err(fail(
                "model_type",
                format!(
                    "is `{}`, expected `{MODEL_TYPE}`; this checkpoint is not DeepSeek V4.1",
                    self.model_type
                ),
            ));
        }
        let q = &self.quantization_config;
        let checks = [
            ("quantization_config.fmt", q.fmt.as_str(), "e4m3"),
            ("quantization_config.scale_fmt", q.scale_fmt.as_str(), "ue8m0"),
        ];
        for (field, found, want) in checks {
            if found != want {
                return Err(fail(
                    field,
                    format!("is `{found}`, this engine reads DeepSeek V4.1 with `{want}`"),
                ));
            }
        }
        if q.weight_block_size != [FP8_BLOCK, FP8_BLOCK] {
            return Err(fail(
                "quantization_config.weight_block_size",
                format!("is {:?}, expected [32, 32] for DeepSeek V4.1", q.weight_block_size),
            ));
        }
        self.text_config
            .validate()
            .map_err(|(field, reason)| fail(&format!("text_config.{field}"), reason))
    }
}

impl Dsv41TextConfig {
    /// Dimensions of the head that carry no RoPE.
    pub fn nope_head_dim(&self) -> usize {
        self.head_dim - self.qk_rope_head_dim
    }

    /// Compress ratio of main layer or DSpark stage `layer_idx`.
    pub fn compress_ratio(&self, layer_idx: usize) -> usize {
        self.compress_ratios[layer_idx]
    }

    pub fn is_kv_source(&self, layer_idx: usize) -> bool {
        self.kv_source_layer_ids.contains(&layer_idx)
    }

    pub fn is_index_source(&self, layer_idx: usize) -> bool {
        self.index_source_layer_ids.contains(&layer_idx)
    }

    /// Whether layer `layer_idx` holds the index keys (`attn.indexer.wk`, `k_norm`): both KV and index source.
    pub fn owns_index_keys(&self, layer_idx: usize) -> bool {
        self.is_kv_source(layer_idx) && self.is_index_source(layer_idx)
    }

    pub fn is_engram_layer(&self, layer_idx: usize) -> bool {
        self.engram_layer_ids.contains(&layer_idx)
    }

    /// What main layer `layer_idx` owns and reads.
    pub fn layer_plan(&self, layer_idx: usize) -> LayerPlan {
        let ratio = self.compress_ratios[layer_idx];
        let latest = |ids: &[usize]| ids.iter().copied().filter(|&i| i <= layer_idx).max();
        let key_owners: Vec<usize> = (0..=layer_idx).filter(|&i| self.owns_index_keys(i)).collect();
        let compressed = ratio != 0;
        let index_source = compressed && self.is_index_source(layer_idx);
        LayerPlan {
            ratio,
            kv_source: latest(&self.kv_source_layer_ids).filter(|_| compressed),
            index_source,
            key_owner: latest(&key_owners).filter(|_| index_source),
            topk_from: latest(&self.index_source_layer_ids).filter(|_| compressed),
            candidate_masked: index_source && layer_idx > self.candidate_source_layer_id,
        }
    }

    /// Field name and reason of the first broken relation.
    fn validate(&self) -> Result<(), (&'static str, String)> {
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
            ("index_head_dim", self.index_head_dim),
            ("index_topk", self.index_topk),
            ("candidate_topk_blocks", self.candidate_topk_blocks),
            ("candidate_block_size", self.candidate_block_size),
            ("hc_mult", self.hc_mult),
            ("hc_sinkhorn_iters", self.hc_sinkhorn_iters),
            ("engram_n_heads", self.engram_n_heads),
            ("engram_compressed_vocab_size", self.engram_compressed_vocab_size),
            ("dspark_block_size", self.dspark_block_size),
            ("dspark_markov_rank", self.dspark_markov_rank),
            ("dspark_n_routed_experts", self.dspark_n_routed_experts),
            ("dspark_num_experts_per_tok", self.dspark_num_experts_per_tok),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err((field, "must be at least 1".into()));
        }
        self.validate_shapes()?;
        self.validate_layers()?;
        self.validate_engram()?;
        self.validate_dspark()
    }

    fn validate_shapes(&self) -> Result<(), (&'static str, String)> {
        let block = crate::dsv4::blocks::BLOCK_TOKENS;
        if self.sliding_window > block {
            return Err((
                "sliding_window",
                format!(
                    "is {}, the cache keeps a window within one block of {block} tokens",
                    self.sliding_window
                ),
            ));
        }
        if self.num_key_value_heads != 1 {
            return Err((
                "num_key_value_heads",
                format!("is {}, DeepSeek V4.1 shares one KV head", self.num_key_value_heads),
            ));
        }
        if !self.qk_rope_head_dim.is_multiple_of(2) || self.qk_rope_head_dim >= self.head_dim.min(self.index_head_dim) {
            return Err((
                "qk_rope_head_dim",
                format!(
                    "is {}, must be even and below head_dim and index_head_dim",
                    self.qk_rope_head_dim
                ),
            ));
        }
        if !self.num_attention_heads.is_multiple_of(self.o_groups) {
            return Err((
                "o_groups",
                format!(
                    "is {}, must divide num_attention_heads {}",
                    self.o_groups, self.num_attention_heads
                ),
            ));
        }
        let fp4_dims = [
            ("hidden_size", self.hidden_size),
            ("moe_intermediate_size", self.moe_intermediate_size),
        ];
        for (field, dim) in fp4_dims {
            if !dim.is_multiple_of(32) {
                return Err((field, format!("is {dim}, FP4 experts need a multiple of 32")));
            }
        }
        for (field, dim) in [("head_dim", self.head_dim), ("index_head_dim", self.index_head_dim)] {
            if !dim.is_multiple_of(32) {
                return Err((
                    field,
                    format!("is {dim}, the KV cache quantizes blocks of 32 (FP4 scales per 16)"),
                ));
            }
        }
        if self.num_experts_per_tok > self.n_routed_experts {
            return Err((
                "num_experts_per_tok",
                format!(
                    "is {}, more than n_routed_experts {}",
                    self.num_experts_per_tok, self.n_routed_experts
                ),
            ));
        }
        if self.n_shared_experts > 1 {
            return Err((
                "n_shared_experts",
                format!("is {}, DeepSeek V4.1 has at most one", self.n_shared_experts),
            ));
        }
        let ids = [
            ("bos_token_id", self.bos_token_id),
            ("eos_token_id", self.eos_token_id),
            ("pad_token_id", self.pad_token_id),
            ("engram_pad_id", self.engram_pad_id),
            ("dspark_noise_token_id", self.dspark_noise_token_id),
        ];
        if let Some((field, id)) = ids.iter().find(|(_, id)| *id as usize >= self.vocab_size) {
            return Err((field, format!("is {id}, must be below vocab_size {}", self.vocab_size)));
        }
        let checks = [
            ("scoring_func", self.scoring_func.as_str(), "sqrtsoftplus"),
            ("expert_dtype", self.expert_dtype.as_str(), "fp4"),
            ("rope_scaling.type", self.rope_scaling.kind.as_str(), "yarn"),
        ];
        match checks.iter().find(|(_, found, want)| found != want) {
            Some((field, found, want)) => Err((
                field,
                format!("is `{found}`, this engine reads DeepSeek V4.1 with `{want}`"),
            )),
            None => Ok(()),
        }
    }

    fn validate_layers(&self) -> Result<(), (&'static str, String)> {
        let n = self.num_hidden_layers;
        let want = n + self.num_nextn_predict_layers;
        if self.compress_ratios.len() != want {
            return Err((
                "compress_ratios",
                format!(
                    "has {} entries, expected num_hidden_layers + num_nextn_predict_layers = {want}",
                    self.compress_ratios.len()
                ),
            ));
        }
        if let Some((i, r)) = self.compress_ratios.iter().enumerate().find(|(_, r)| **r > 2) {
            return Err(("compress_ratios", format!("entry {i} is {r}, expected 0, 1 or 2")));
        }
        if let Some(i) = (n..want).find(|&i| self.compress_ratios[i] != 0) {
            return Err(("compress_ratios", format!("entry {i} is a DSpark stage and must be 0")));
        }
        for (field, ids) in [
            ("kv_source_layer_ids", &self.kv_source_layer_ids),
            ("index_source_layer_ids", &self.index_source_layer_ids),
        ] {
            check_ids(ids, n).map_err(|reason| (field, reason))?;
            if let Some(&i) = ids.iter().find(|&&i| self.compress_ratios[i] == 0) {
                return Err((field, format!("lists layer {i}, whose compress ratio is 0")));
            }
        }
        for layer_idx in 0..n {
            let plan = self.layer_plan(layer_idx);
            if plan.ratio == 0 {
                continue;
            }
            match plan.kv_source {
                Some(src) if self.compress_ratios[src] == plan.ratio => {}
                _ => {
                    return Err((
                        "kv_source_layer_ids",
                        format!(
                            "layer {layer_idx} (ratio {}) has no KV source of the same ratio at or below it",
                            plan.ratio
                        ),
                    ));
                }
            }
            if plan
                .topk_from
                .is_some_and(|src| self.compress_ratios[src] != plan.ratio)
            {
                return Err((
                    "index_source_layer_ids",
                    format!("layer {layer_idx} would reuse the top-k of an index source with another ratio"),
                ));
            }
            if plan.candidate_masked && self.compress_ratios[self.candidate_source_layer_id] != plan.ratio {
                return Err((
                    "candidate_source_layer_id",
                    format!("layer {layer_idx} reads the candidate pool of a layer with another ratio"),
                ));
            }
            if plan.topk_from.is_none() {
                return Err((
                    "index_source_layer_ids",
                    format!("layer {layer_idx} is compressed but no index source is at or below it"),
                ));
            }
            if plan.index_source && plan.key_owner.is_none_or(|k| self.compress_ratios[k] != plan.ratio) {
                return Err((
                    "index_source_layer_ids",
                    format!(
                        "index source {layer_idx} has no key owner (a KV and index source) of ratio {} at or below it",
                        plan.ratio
                    ),
                ));
            }
        }
        if self.candidate_topk_blocks * self.candidate_block_size < self.index_topk {
            return Err((
                "candidate_topk_blocks",
                format!(
                    "keeps {} blocks of {}, fewer positions than index_topk {}; masked entries would be selected",
                    self.candidate_topk_blocks, self.candidate_block_size, self.index_topk
                ),
            ));
        }
        let cand = self.candidate_source_layer_id;
        if !self.owns_index_keys(cand) {
            return Err((
                "candidate_source_layer_id",
                format!("is {cand}, must be both a KV source and an index source"),
            ));
        }
        Ok(())
    }

    fn validate_engram(&self) -> Result<(), (&'static str, String)> {
        check_ids(&self.engram_layer_ids, self.num_hidden_layers).map_err(|r| ("engram_layer_ids", r))?;
        if self.engram_max_ngram_size < 2 || self.engram_vocab_size.len() != self.engram_max_ngram_size - 1 {
            return Err((
                "engram_vocab_size",
                format!(
                    "has {} entries, expected engram_max_ngram_size - 1 (max size at least 2)",
                    self.engram_vocab_size.len()
                ),
            ));
        }
        if self.engram_head_dim == 0 || !self.engram_head_dim.is_multiple_of(32) {
            return Err((
                "engram_head_dim",
                format!("is {}, the tables keep one scale per 32 columns", self.engram_head_dim),
            ));
        }
        if self.engram_compressed_vocab_size > self.vocab_size {
            return Err((
                "engram_compressed_vocab_size",
                format!(
                    "is {}, more than vocab_size {}",
                    self.engram_compressed_vocab_size, self.vocab_size
                ),
            ));
        }
        let tables = crate::dsv41::engram::layer_tables(
            &self.engram_layer_ids,
            &self.engram_vocab_size,
            self.engram_n_heads,
            self.engram_compressed_vocab_size as u64,
        );
        let derived: Vec<u64> = tables.iter().map(|t| t.num_rows()).collect();
        if derived != self.engram_num_embeddings {
            return Err((
                "engram_num_embeddings",
                format!(
                    "is {:?}, but the prime table sizes derived from engram_vocab_size sum to {derived:?}",
                    self.engram_num_embeddings
                ),
            ));
        }
        Ok(())
    }

    fn validate_dspark(&self) -> Result<(), (&'static str, String)> {
        if self.dspark_target_layer_ids.is_empty() {
            return Err(("dspark_target_layer_ids", "must name at least one layer".into()));
        }
        check_ids(&self.dspark_target_layer_ids, self.num_hidden_layers).map_err(|r| ("dspark_target_layer_ids", r))?;
        if self.dspark_num_experts_per_tok > self.dspark_n_routed_experts {
            return Err((
                "dspark_num_experts_per_tok",
                format!(
                    "is {}, more than dspark_n_routed_experts {}",
                    self.dspark_num_experts_per_tok, self.dspark_n_routed_experts
                ),
            ));
        }
        Ok(())
    }
}

/// Strictly increasing layer ids below `num_layers`.
fn check_ids(ids: &[usize], num_layers: usize) -> Result<(), String> {
    if let Some(&i) = ids.iter().find(|&&i| i >= num_layers) {
        return Err(format!("lists layer {i}, but there are only {num_layers} layers"));
    }
    if ids.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!("is {ids:?}, must be strictly increasing"));
    }
    Ok(())
}
