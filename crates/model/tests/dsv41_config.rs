//! DeepSeek V4.1: config checks, the manifest at Flash size, and synth checkpoints that open and match it.

use std::path::Path;

use tensorfold_model::config::dsv41::Dsv41Config;
use tensorfold_model::dsv41::{self, Dsv41Checkpoint};
use tensorfold_model::synth::{self, Dsv41Preset, SynthOptions};

fn json(preset: Dsv41Preset) -> serde_json::Value {
    serde_json::to_value(preset.config()).unwrap()
}

fn parse_err(v: &serde_json::Value) -> String {
    Dsv41Config::parse(Path::new("/ckpt/config.json"), &v.to_string())
        .expect_err("bad config parsed")
        .to_string()
}

#[test]
fn presets_round_trip_through_json() {
    for preset in [Dsv41Preset::Tiny, Dsv41Preset::Small, Dsv41Preset::Flash] {
        let c = Dsv41Config::parse(Path::new("config.json"), &json(preset).to_string()).unwrap();
        assert_eq!(c, preset.config());
    }
}

#[test]
fn flash_manifest_has_the_hub_tensor_count_and_engram_share() {
    let c = Dsv41Preset::Flash.config().text_config;
    let m = dsv41::manifest(&c);
    // The hub's 96,085 tensors include the vision tower, which this text manifest leaves out.
    assert!(
        (95_000..96_085).contains(&m.specs.len()),
        "text tensors: {}",
        m.specs.len()
    );
    let engram: u64 = m
        .specs
        .iter()
        .filter(|s| s.name.contains(".engram.embed."))
        .map(|s| s.num_bytes() as u64)
        .sum();
    assert_eq!(
        (engram + 500_000_000) / 1_000_000_000,
        203,
        "MODELS-V41.md: Engram 203 GB, got {engram} bytes"
    );
    let total = m.num_bytes();
    assert!(
        (500_000_000_000..520_000_000_000).contains(&total),
        "MODELS-V41.md: 510 GB, got {total}"
    );
    let names: Vec<&str> = m.specs.iter().map(|s| s.name.as_str()).collect();
    for absent in ["hc_head", "compressor.ape", "tid2eid"] {
        let found = names.iter().find(|n| n.contains(absent));
        assert!(found.is_none(), "unexpected tensor {found:?}");
    }
    for present in [
        "layers.2.attn.compressor.wgate.weight",
        "layers.8.attn.compressor.wgate.weight",
        "layers.20.attn.indexer.wk.weight",
        "layers.24.attn.indexer.wq_b.scale",
        "layers.14.engram.embed.scale",
        "layers.5.ffn.gate.bias_vl",
        "mtp.0.main_proj.weight",
        "mtp.2.markov_head.embed.weight",
        "mtp.2.confidence_head.proj.weight",
    ] {
        assert!(names.contains(&present), "missing {present}");
    }
    for owner_only in [
        "layers.24.attn.indexer.wk.weight",
        "layers.20.attn.compressor.wgate.weight",
        "layers.3.attn.compressor.wkv.weight",
    ] {
        assert!(!names.contains(&owner_only), "{owner_only} belongs to another layer");
    }
}

#[test]
fn wrong_block_size_is_named() {
    let mut v = json(Dsv41Preset::Tiny);
    v["quantization_config"]["weight_block_size"] = serde_json::json!([128, 128]);
    let err = parse_err(&v);
    assert!(
        err.contains("field `quantization_config.weight_block_size`") && err.contains("[32, 32]"),
        "{err}"
    );
}

#[test]
fn missing_text_field_is_named() {
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"].as_object_mut().unwrap().remove("engram_layer_ids");
    let err = parse_err(&v);
    assert!(
        err.contains("field `text_config.engram_layer_ids`") && err.contains("missing field"),
        "{err}"
    );
}

#[test]
fn a_window_beyond_one_cache_block_is_named() {
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["sliding_window"] = serde_json::json!(129);
    let err = parse_err(&v);
    assert!(
        err.contains("field `text_config.sliding_window`") && err.contains("one block of 128 tokens"),
        "{err}"
    );
}

#[test]
fn engram_rows_must_match_the_derived_primes() {
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["engram_num_embeddings"][1] = serde_json::json!(30_000);
    let err = parse_err(&v);
    assert!(
        err.contains("field `text_config.engram_num_embeddings`") && err.contains("30058"),
        "{err}"
    );
}

#[test]
fn layer_without_a_kv_source_is_named() {
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["kv_source_layer_ids"] = serde_json::json!([2]);
    let err = parse_err(&v);
    assert!(
        err.contains("text_config.kv_source_layer_ids") && err.contains("layer 4 (ratio 1)"),
        "{err}"
    );
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["compress_ratios"][8] = serde_json::json!(1);
    assert!(parse_err(&v).contains("DSpark stage"));
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["candidate_source_layer_id"] = serde_json::json!(6);
    assert!(parse_err(&v).contains("text_config.candidate_source_layer_id"));
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["candidate_topk_blocks"] = serde_json::json!(1);
    assert!(parse_err(&v).contains("fewer positions than index_topk"));
    let mut v = json(Dsv41Preset::Tiny);
    v["text_config"]["index_source_layer_ids"] = serde_json::json!([2, 4, 5]);
    v["text_config"]["compress_ratios"][5] = serde_json::json!(2);
    v["text_config"]["kv_source_layer_ids"] = serde_json::json!([2, 4, 5]);
    assert!(parse_err(&v).contains("another ratio"), "{}", parse_err(&v));
}

#[test]
fn v4_config_is_refused_with_the_family() {
    let mut v = json(Dsv41Preset::Tiny);
    v["model_type"] = serde_json::json!("deepseek_v4");
    assert!(parse_err(&v).contains("not DeepSeek V4.1"));
}

#[test]
fn tiny_synth_opens_and_is_deterministic() {
    let write = |seed| {
        let dir = tempfile::tempdir().unwrap();
        let opts = SynthOptions {
            preset: Dsv41Preset::Tiny,
            seed,
            out: dir.path().to_path_buf(),
            shard_bytes: synth::DEFAULT_SHARD_BYTES,
            chat_template: true,
            force: false,
        };
        synth::write_dsv41(&opts).unwrap();
        dir
    };
    let (a, b) = (write(0), write(0));
    let ckpt = Dsv41Checkpoint::open(a.path()).unwrap();
    assert_eq!(ckpt.config, Dsv41Preset::Tiny.config());
    let c = &ckpt.config.text_config;
    let table = ckpt.weights.tensors().get("layers.1.engram.embed.weight").unwrap();
    assert_eq!(
        table.shape,
        vec![c.engram_num_embeddings[0] as usize, c.engram_head_dim]
    );
    let bytes = |d: &tempfile::TempDir| std::fs::read(d.path().join("model.safetensors")).unwrap();
    assert!(bytes(&a) == bytes(&b), "seed 0 wrote different bytes twice");
    std::fs::remove_file(a.path().join("model.safetensors")).unwrap();
    let opts = SynthOptions {
        preset: Dsv41Preset::Tiny,
        seed: 0,
        out: a.path().to_path_buf(),
        shard_bytes: 8 << 20,
        chat_template: true,
        force: true,
    };
    synth::write_dsv41(&opts).unwrap();
    let sharded = Dsv41Checkpoint::open(a.path()).unwrap();
    assert!(
        sharded.weights.files().len() > 1,
        "8 MiB shards should split the tiny checkpoint"
    );
}
