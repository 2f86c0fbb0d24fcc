//! Configs of the synthetic DeepSeek V4 checkpoints: `tiny` for CI, `small` for CPU benchmarks, `flash-layers`.

use crate::config::dsv4::{Dsv4Config, MODEL_TYPE, QuantizationConfig, RopeScaling};

/// A named synthetic model size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// CI-sized: ratios 0, 4 and 128, hash and biased-router layers, 8 experts, a 32-token window.
    Tiny,
    /// About 0.8 B parameters, for CPU benchmarks.
    Small,
    /// V4-Flash's real dimensions with this many layers, for memory-bound benchmarks.
    FlashLayers(usize),
}

impl Preset {
    /// Parses a preset name; `flash_layers` supplies the layer count of `flash-layers`.
    pub fn parse(name: &str, flash_layers: Option<usize>) -> Result<Preset, String> {
        match (name, flash_layers) {
            ("tiny", None) => Ok(Preset::Tiny),
            ("small", None) => Ok(Preset::Small),
            ("flash-layers", Some(0)) => Err("--layers must be at least 1".into()),
            ("flash-layers", Some(n)) => Ok(Preset::FlashLayers(n)),
            ("flash-layers", None) => Err("preset flash-layers needs --layers N".into()),
            ("tiny" | "small", Some(_)) => Err("--layers applies only to preset flash-layers".into()),
            (other, _) => Err(format!("unknown preset `{other}`; choose tiny, small or flash-layers")),
        }
    }

    /// The config this preset writes.
    pub fn config(self) -> Dsv4Config {
        match self {
            Preset::Tiny => tiny(),
            Preset::Small => small(),
            Preset::FlashLayers(n) => flash_layers(n),
        }
    }
}

/// V4-Flash's config; other presets shrink it.
fn flash() -> Dsv4Config {
    Dsv4Config {
        architectures: vec!["DeepseekV4ForCausalLM".into()],
        model_type: MODEL_TYPE.into(),
        vocab_size: 129_280,
        hidden_size: 4096,
        num_hidden_layers: 43,
        num_attention_heads: 64,
        num_key_value_heads: 1,
        head_dim: 512,
        qk_rope_head_dim: 64,
        q_lora_rank: 1024,
        o_lora_rank: 1024,
        o_groups: 8,
        n_routed_experts: 256,
        num_experts_per_tok: 6,
        n_shared_experts: 1,
        moe_intermediate_size: 2048,
        scoring_func: "sqrtsoftplus".into(),
        topk_method: "noaux_tc".into(),
        norm_topk_prob: true,
        routed_scaling_factor: 1.5,
        num_hash_layers: 3,
        swiglu_limit: 10.0,
        sliding_window: 128,
        index_n_heads: 64,
        index_head_dim: 128,
        index_topk: 512,
        hc_mult: 4,
        hc_sinkhorn_iters: 20,
        hc_eps: 1e-6,
        bos_token_id: 0,
        eos_token_id: 1,
        rms_norm_eps: 1e-6,
        max_position_embeddings: 1_048_576,
        num_nextn_predict_layers: 1,
        rope_theta: 10_000.0,
        compress_rope_theta: 160_000.0,
        rope_scaling: RopeScaling {
            kind: "yarn".into(),
            factor: 16.0,
            original_max_position_embeddings: 65_536,
            beta_fast: 32.0,
            beta_slow: 1.0,
        },
        compress_ratios: flash_ratios(43),
        expert_dtype: "fp4".into(),
        quantization_config: QuantizationConfig {
            quant_method: "fp8".into(),
            fmt: "e4m3".into(),
            activation_scheme: "dynamic".into(),
            weight_block_size: [128, 128],
            scale_fmt: "ue8m0".into(),
        },
        tie_word_embeddings: false,
    }
}

/// Flash's plan: layers 0 and 1 window-only, then 4 on even and 128 on odd layers, then the MTP layer at 0.
fn flash_ratios(num_layers: usize) -> Vec<usize> {
    let main = (0..num_layers).map(|i| match i {
        0 | 1 => 0,
        i if i % 2 == 0 => 4,
        _ => 128,
    });
    main.chain([0]).collect()
}

fn flash_layers(num_layers: usize) -> Dsv4Config {
    Dsv4Config {
        num_hidden_layers: num_layers,
        num_hash_layers: num_layers.min(3),
        compress_ratios: flash_ratios(num_layers),
        ..flash()
    }
}

fn tiny() -> Dsv4Config {
    Dsv4Config {
        hidden_size: 128,
        num_hidden_layers: 4,
        num_attention_heads: 4,
        head_dim: 128,
        qk_rope_head_dim: 64,
        q_lora_rank: 128,
        o_lora_rank: 64,
        o_groups: 2,
        n_routed_experts: 8,
        num_experts_per_tok: 2,
        moe_intermediate_size: 128,
        num_hash_layers: 2,
        sliding_window: 32,
        index_n_heads: 16,
        index_head_dim: 128,
        index_topk: 16,
        compress_ratios: vec![0, 4, 128, 4, 0],
        ..flash()
    }
}

fn small() -> Dsv4Config {
    Dsv4Config {
        hidden_size: 1024,
        num_hidden_layers: 8,
        num_attention_heads: 16,
        q_lora_rank: 512,
        o_lora_rank: 512,
        o_groups: 4,
        n_routed_experts: 32,
        num_experts_per_tok: 4,
        moe_intermediate_size: 512,
        num_hash_layers: 2,
        index_n_heads: 16,
        index_topk: 256,
        compress_ratios: flash_ratios(8),
        ..flash()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_preset_validates() {
        for p in [
            Preset::Tiny,
            Preset::Small,
            Preset::FlashLayers(1),
            Preset::FlashLayers(4),
        ] {
            p.config().validate(Path::new("preset")).unwrap();
        }
        assert_eq!(flash().compress_ratios.len(), 44);
        flash().validate(Path::new("flash")).unwrap();
    }

    #[test]
    fn tiny_reaches_every_layer_kind() {
        let c = tiny();
        let main = &c.compress_ratios[..c.num_hidden_layers];
        for ratio in [0, 4, 128] {
            assert!(main.contains(&ratio), "no layer with ratio {ratio}");
        }
        assert!(c.is_hash_layer(0) && !c.is_hash_layer(c.num_hidden_layers - 1));
        assert!(c.n_routed_experts >= 8);
    }

    #[test]
    fn preset_names_parse_with_clear_errors() {
        assert_eq!(Preset::parse("tiny", None), Ok(Preset::Tiny));
        assert_eq!(Preset::parse("flash-layers", Some(2)), Ok(Preset::FlashLayers(2)));
        assert!(Preset::parse("flash-layers", None).unwrap_err().contains("--layers"));
        assert!(
            Preset::parse("huge", None)
                .unwrap_err()
                .contains("tiny, small or flash-layers")
        );
    }
}
