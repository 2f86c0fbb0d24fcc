//! `tensorfold info` for DeepSeek V4.1 checkpoints: layer plan with KV and index owners, Engram tables, sizes.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::json;
use tensorfold_model::config::dsv41::Dsv41TextConfig;
use tensorfold_model::dsv41::{Dsv41Checkpoint, Summary};

use crate::info::{count, size};

pub fn run(dir: &Path, read_all: bool, as_json: bool) -> anyhow::Result<()> {
    let ckpt = Dsv41Checkpoint::open(dir)?;
    if read_all {
        ckpt.weights.prefault();
    }
    let c = &ckpt.config.text_config;
    let s = Summary::of(c);
    let (files, tensors) = (ckpt.weights.files().len(), ckpt.weights.tensors().len());
    if as_json {
        let bytes: serde_json::Map<_, _> = s
            .bytes_by_dtype
            .iter()
            .map(|(d, b)| (d.name().to_string(), json!(b)))
            .collect();
        let out = json!({
            "family": "dsv41", "model_type": ckpt.config.model_type, "files": files, "tensors": tensors,
            "layers": c.num_hidden_layers, "dspark_stages": c.num_nextn_predict_layers,
            "compress_ratios": c.compress_ratios, "kv_source_layer_ids": c.kv_source_layer_ids,
            "index_source_layer_ids": c.index_source_layer_ids, "engram_layer_ids": c.engram_layer_ids,
            "engram_num_embeddings": c.engram_num_embeddings,
            "total_params": s.total_params, "active_params": s.active_params, "dspark_params": s.dspark_params,
            "engram_params": s.engram_params, "engram_bytes": s.engram_bytes,
            "bytes_by_dtype": bytes, "total_bytes": s.total_bytes(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print!("{}", text_report(dir, &ckpt.config.model_type, c, &s, files, tensors));
    Ok(())
}

fn text_report(dir: &Path, model_type: &str, c: &Dsv41TextConfig, s: &Summary, files: usize, tensors: usize) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "checkpoint   {}", dir.display());
    let _ = writeln!(
        w,
        "family       dsv41 (DeepSeek V4.1, model_type {model_type}; text model)"
    );
    let _ = writeln!(
        w,
        "files        {files} file(s), {tensors} tensors, all match the dsv41 manifest"
    );
    let _ = writeln!(
        w,
        "shape        hidden {}, {} heads x {} (rope {}), q_lora {}, {} experts (top {}, {} shared, inter {}), vocab {}",
        c.hidden_size,
        c.num_attention_heads,
        c.head_dim,
        c.qk_rope_head_dim,
        c.q_lora_rank,
        c.n_routed_experts,
        c.num_experts_per_tok,
        c.n_shared_experts,
        c.moe_intermediate_size,
        c.vocab_size
    );
    let _ = writeln!(
        w,
        "layer plan   window {} tokens; index top-{}; candidate pool of layer {}: top {} blocks of {}",
        c.sliding_window, c.index_topk, c.candidate_source_layer_id, c.candidate_topk_blocks, c.candidate_block_size
    );
    for layer_idx in 0..c.num_hidden_layers {
        let _ = writeln!(w, "  layer {layer_idx:<3} {}", layer_line(c, layer_idx));
    }
    for stage in 0..c.num_nextn_predict_layers {
        let _ = writeln!(
            w,
            "  dspark {stage:<2} window only, {} experts (top {})",
            c.dspark_n_routed_experts, c.dspark_num_experts_per_tok
        );
    }
    let _ = writeln!(
        w,
        "engram       layers {:?}, {}-grams x {} heads x {} dims, rows {:?}",
        c.engram_layer_ids, c.engram_max_ngram_size, c.engram_n_heads, c.engram_head_dim, c.engram_num_embeddings
    );
    let _ = writeln!(
        w,
        "parameters   total {}, active per token {}, DSpark {}, Engram tables {}",
        count(s.total_params),
        count(s.active_params),
        count(s.dspark_params),
        count(s.engram_params)
    );
    let _ = writeln!(
        w,
        "bytes        {} in all, Engram tables {}",
        size(s.total_bytes()),
        size(s.engram_bytes)
    );
    for (dtype, bytes) in &s.bytes_by_dtype {
        let _ = writeln!(w, "  {:<9} {}", dtype.name(), size(*bytes));
    }
    out
}

fn layer_line(c: &Dsv41TextConfig, layer_idx: usize) -> String {
    let p = c.layer_plan(layer_idx);
    let mut parts = vec![format!("ratio {}", p.ratio)];
    if c.is_engram_layer(layer_idx) {
        parts.push("Engram before".into());
    }
    match p.kv_source {
        None => parts.push("window only".into()),
        Some(src) if src == layer_idx => parts.push("KV source".into()),
        Some(src) => parts.push(format!("reads KV of {src}")),
    }
    if p.index_source {
        match p.key_owner {
            Some(k) if k == layer_idx => parts.push("indexer with keys".into()),
            Some(k) => parts.push(format!("indexer queries, keys of {k}")),
            None => {}
        }
    } else if let Some(t) = p.topk_from {
        parts.push(format!("top-k of {t}"));
    }
    if layer_idx == c.candidate_source_layer_id {
        parts.push("builds the candidate pool".into());
    }
    if p.candidate_masked {
        parts.push("inside the candidate pool".into());
    }
    parts.join(", ")
}
