//! Configs of the synthetic DeepSeek V4.1 checkpoints: `tiny` for CI and the float64 reference, `small` for CPU runs.

use crate::config::dsv41::{Dsv41Config, Dsv41TextConfig, MODEL_TYPE, QuantizationConfig, RopeScaling};
use crate::dsv41::engram::layer_tables;

/// A named synthetic V4.1 model size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dsv41Preset {
    /// CI-sized: every layer kind (window, ratio 2 and 1, owners and borrowers, the candidate pool), two Engram layers.
    Tiny,
    /// About 1 B parameters with 12 layers, for CPU runs.
    Small,
    /// V4.1-Flash's real config (for checks and size reports; far too large to write here).
    Flash,
}

impl Dsv41Preset {
    /// Parses a preset name.
    pub fn parse(name: &str) -> Result<Dsv41Preset, String> {
        match name {
            "tiny" => Ok(Dsv41Preset::Tiny),
            "small" => Ok(Dsv41Preset::Small),
            other => Err(format!("unknown dsv41 preset `{other}`; choose tiny or small")),
        }
    }

    /// The config this preset writes.
    pub fn config(self) -> Dsv41Config {
        let text_config = match self {
            Dsv41Preset::Tiny => tiny(),
            Dsv41Preset::Small => small(),
            Dsv41Preset::Flash => flash(),
        };
        Dsv41Config {
            architectures: vec!["DeepseekV41ForCausalLM".into()],
            model_type: MODEL_TYPE.into(),
            text_config,
            quantization_config: QuantizationConfig {
                quant_method: "fp8".into(),
                fmt: "e4m3".into(),
                activation_scheme: "dynamic".into(),
                weight_block_size: [32, 32],
                scale_fmt: "ue8m0".into(),
            },
            vision_config: None,
        }
    }
}

/// `engram_num_embeddings` for the layer ids and base sizes of `c`, derived as the reference derives them.
fn with_engram_rows(mut c: Dsv41TextConfig) -> Dsv41TextConfig {
    let tables = layer_tables(
        &c.engram_layer_ids,
        &c.engram_vocab_size,
        c.engram_n_heads,
        c.engram_compressed_vocab_size as u64,
    );
    c.engram_num_embeddings = tables.iter().map(|t| t.num_rows()).collect();
    c
}

/// V4.1-Flash's text config, as MODELS-V41.md gives it.
fn flash() -> Dsv41TextConfig {
    let num_layers = 40;
    let compress_ratios = [vec![0, 0], vec![2; 18], vec![1; 20], vec![0; 3]].concat();
    Dsv41TextConfig {
        vocab_size: 129_280,
        hidden_size: 5120,
        num_hidden_layers: num_layers,
        num_attention_heads: 64,
        num_key_value_heads: 1,
        head_dim: 512,
        qk_rope_head_dim: 64,
        q_lora_rank: 1280,
        o_lora_rank: 1024,
        o_groups: 8,
        rms_norm_eps: 1e-20,
        max_position_embeddings: 1_048_576,
        rope_theta: 10_000.0,
        compress_rope_theta: 160_000.0,
        rope_scaling: RopeScaling {
            kind: "yarn".into(),
            factor: 16.0,
            original_max_position_embeddings: 65_536,
            beta_fast: 32.0,
            beta_slow: 1.0,
        },
        n_routed_experts: 384,
        n_shared_experts: 1,
        num_experts_per_tok: 6,
        moe_intermediate_size: 2304,
        scoring_func: "sqrtsoftplus".into(),
        topk_method: "noaux_tc".into(),
        norm_topk_prob: true,
        routed_scaling_factor: 1.5,
        swiglu_limit: 10.0,
        expert_dtype: "fp4".into(),
        sliding_window: 128,
        compress_ratios,
        kv_source_layer_ids: vec![2, 8, 14, 20],
        index_source_layer_ids: vec![2, 8, 14, 20, 24, 28, 32, 36],
        index_n_heads: 32,
        index_head_dim: 128,
        index_topk: 512,
        candidate_source_layer_id: 20,
        candidate_topk_blocks: 2048,
        candidate_block_size: 8,
        hc_mult: 4,
        hc_sinkhorn_iters: 20,
        hc_eps: 1e-6,
        engram_layer_ids: vec![1, 14],
        engram_vocab_size: vec![16_000_000; 3],
        engram_num_embeddings: vec![384_006_168, 384_016_682],
        engram_max_ngram_size: 4,
        engram_n_heads: 8,
        engram_head_dim: 256,
        engram_pad_id: 2,
        engram_compressed_vocab_size: 99_092,
        num_nextn_predict_layers: 3,
        dspark_block_size: 5,
        dspark_noise_token_id: 128_799,
        dspark_target_layer_ids: vec![37, 38, 39],
        dspark_markov_rank: 256,
        dspark_n_routed_experts: 128,
        dspark_num_experts_per_tok: 3,
        bos_token_id: 0,
        eos_token_id: 1,
        pad_token_id: 2,
    }
}

fn tiny() -> Dsv41TextConfig {
    with_engram_rows(Dsv41TextConfig {
        hidden_size: 128,
        num_hidden_layers: 8,
        num_attention_heads: 4,
        head_dim: 128,
        q_lora_rank: 128,
        o_lora_rank: 64,
        o_groups: 2,
        n_routed_experts: 8,
        num_experts_per_tok: 2,
        moe_intermediate_size: 128,
        sliding_window: 16,
        compress_ratios: [vec![0, 0], vec![2; 2], vec![1; 4], vec![0; 3]].concat(),
        kv_source_layer_ids: vec![2, 4],
        index_source_layer_ids: vec![2, 4, 6],
        index_n_heads: 8,
        index_topk: 8,
        candidate_source_layer_id: 4,
        candidate_topk_blocks: 3,
        candidate_block_size: 4,
        engram_layer_ids: vec![1, 3],
        engram_vocab_size: vec![1000; 3],
        engram_head_dim: 32,
        dspark_target_layer_ids: vec![5, 6, 7],
        dspark_markov_rank: 32,
        dspark_n_routed_experts: 8,
        dspark_num_experts_per_tok: 2,
        ..flash()
    })
}

fn small() -> Dsv41TextConfig {
    with_engram_rows(Dsv41TextConfig {
        hidden_size: 1024,
        num_hidden_layers: 12,
        num_attention_heads: 16,
        q_lora_rank: 512,
        o_lora_rank: 512,
        o_groups: 4,
        n_routed_experts: 32,
        num_experts_per_tok: 4,
        moe_intermediate_size: 512,
        compress_ratios: [vec![0, 0], vec![2; 4], vec![1; 6], vec![0; 3]].concat(),
        kv_source_layer_ids: vec![2, 4, 6],
        index_source_layer_ids: vec![2, 4, 6, 8, 10],
        index_n_heads: 16,
        index_topk: 256,
        candidate_source_layer_id: 6,
        candidate_topk_blocks: 64,
        engram_layer_ids: vec![1, 4],
        engram_vocab_size: vec![20_000; 3],
        engram_head_dim: 64,
        dspark_target_layer_ids: vec![9, 10, 11],
        dspark_markov_rank: 64,
        dspark_n_routed_experts: 16,
        dspark_num_experts_per_tok: 2,
        ..flash()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_preset_validates() {
        for p in [Dsv41Preset::Tiny, Dsv41Preset::Small, Dsv41Preset::Flash] {
            p.config().validate(Path::new("preset")).unwrap();
        }
    }

    #[test]
    fn tiny_reaches_every_layer_kind() {
        let c = tiny();
        let plans: Vec<_> = (0..c.num_hidden_layers).map(|l| c.layer_plan(l)).collect();
        for ratio in [0, 1, 2] {
            assert!(plans.iter().any(|p| p.ratio == ratio), "no layer with ratio {ratio}");
        }
        assert!(
            plans
                .iter()
                .enumerate()
                .any(|(l, p)| p.ratio == 2 && p.kv_source != Some(l)),
            "no ratio-2 borrower"
        );
        assert!(
            plans
                .iter()
                .enumerate()
                .any(|(l, p)| p.ratio == 1 && p.kv_source != Some(l)),
            "no ratio-1 borrower"
        );
        assert!(
            plans.iter().any(|p| p.ratio != 0 && !p.index_source),
            "no layer reusing a published top-k"
        );
        assert!(
            plans
                .iter()
                .enumerate()
                .any(|(l, p)| p.index_source && p.key_owner != Some(l)),
            "no query-only indexer"
        );
        assert!(
            plans.iter().any(|p| p.candidate_masked),
            "no layer reading the candidate pool"
        );
    }
}
