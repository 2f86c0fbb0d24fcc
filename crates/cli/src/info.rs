//! `tensorfold info`: what a checkpoint holds and what it needs.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use tensorfold_model::config::dsv4::{Dsv4Config, MODEL_TYPE};
use tensorfold_model::config::model_type;
use tensorfold_model::dsv4::{Dsv4Checkpoint, KvBytes, Summary};

#[derive(Args)]
pub struct InfoArgs {
    /// Checkpoint folder (config.json plus model.safetensors or a sharded index).
    dir: PathBuf,
    /// Context length in tokens for the memory estimate (default: 65536 and the model's maximum).
    #[arg(long)]
    context: Option<u64>,
    /// Also read every byte of the weights once (shows progress; checks the files can be read end to end).
    #[arg(long)]
    read_all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: InfoArgs) -> anyhow::Result<()> {
    let found = model_type(&args.dir)?;
    if found == tensorfold_model::config::dsv41::MODEL_TYPE {
        return crate::info_v41::run(&args.dir, args.read_all, args.json);
    }
    if found != MODEL_TYPE {
        return Err(anyhow!(
            "{}: model_type `{found}` is not a family tensorfold reads yet (it reads `{MODEL_TYPE}` and `{}`)",
            args.dir.display(),
            tensorfold_model::config::dsv41::MODEL_TYPE
        ));
    }
    let ckpt = Dsv4Checkpoint::open(&args.dir)?;
    if args.read_all {
        ckpt.weights.prefault();
    }
    let c = &ckpt.config;
    let summary = Summary::of(c);
    let contexts = match args.context {
        Some(n) => vec![n],
        None => vec![
            65_536.min(c.max_position_embeddings as u64),
            c.max_position_embeddings as u64,
        ],
    };
    let files = ckpt.weights.files().len();
    let tensors = ckpt.weights.tensors().len();
    if args.json {
        let memory: Vec<_> = contexts
            .iter()
            .map(|&n| {
                let kv = Summary::kv_bytes(c, n);
                json!({ "context": n, "window": kv.window, "compressed": kv.compressed, "indexer": kv.indexer,
                        "compressor_state": kv.compressor_state, "cache_per_sequence": kv.total(),
                        "weights_plus_one_sequence": summary.total_bytes() + kv.total() })
            })
            .collect();
        let bytes: serde_json::Map<_, _> = summary
            .bytes_by_dtype
            .iter()
            .map(|(d, b)| (d.name().to_string(), json!(b)))
            .collect();
        let out = json!({
            "family": "dsv4", "model_type": c.model_type, "files": files, "tensors": tensors,
            "layers": c.num_hidden_layers, "mtp_layers": c.num_nextn_predict_layers,
            "compress_ratios": c.compress_ratios, "hash_layers": c.num_hash_layers,
            "total_params": summary.total_params, "active_params": summary.active_params,
            "mtp_params": summary.mtp_params, "bytes_by_dtype": bytes, "total_bytes": summary.total_bytes(),
            "memory": memory,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print!("{}", text_report(&args.dir, c, &summary, files, tensors, &contexts));
    Ok(())
}

fn text_report(
    dir: &std::path::Path,
    c: &Dsv4Config,
    s: &Summary,
    files: usize,
    tensors: usize,
    contexts: &[u64],
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "checkpoint   {}", dir.display());
    let _ = writeln!(w, "family       dsv4 (DeepSeek V4, model_type {})", c.model_type);
    let _ = writeln!(
        w,
        "files        {files} file(s), {tensors} tensors, all match the dsv4 manifest"
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
        "layer plan   window {} tokens; index top-{}",
        c.sliding_window, c.index_topk
    );
    for (idx, &ratio) in c.compress_ratios.iter().enumerate() {
        let (name, router) = if idx < c.num_hidden_layers {
            let router = if c.is_hash_layer(idx) {
                "hash router"
            } else {
                "biased router"
            };
            (format!("layer {idx}"), router)
        } else {
            (format!("mtp {}", idx - c.num_hidden_layers), "biased router")
        };
        let attention = match ratio {
            0 => "sliding window".to_string(),
            4 => "window + ratio-4 compressed (CSA) + indexer".to_string(),
            r => format!("window + ratio-{r} compressed (HCA)"),
        };
        let _ = writeln!(w, "  {name:<9} ratio {ratio:<4} {attention:<46} {router}");
    }
    let _ = writeln!(
        w,
        "parameters   total {}, active per token {}, MTP {}",
        count(s.total_params),
        count(s.active_params),
        count(s.mtp_params)
    );
    let _ = writeln!(w, "bytes        {} in all", size(s.total_bytes()));
    for (dtype, bytes) in &s.bytes_by_dtype {
        let _ = writeln!(w, "  {:<9} {}", dtype.name(), size(*bytes));
    }
    for &n in contexts {
        let kv: KvBytes = Summary::kv_bytes(c, n);
        let _ = writeln!(
            w,
            "memory at {n} tokens: cache {} per sequence in the pool (window rings {}, compressed {}, indexer {}, compressor state {}); weights + 1 sequence {}",
            size(kv.total()),
            size(kv.window),
            size(kv.compressed),
            size(kv.indexer),
            size(kv.compressor_state),
            size(s.total_bytes() + kv.total())
        );
    }
    out
}

pub(crate) fn count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2} B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2} M", n as f64 / 1e6),
        n => format!("{:.1} K", n as f64 / 1e3),
    }
}

pub(crate) fn size(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        n if n >= 1 << 30 => format!("{:.2} GiB", b / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.2} MiB", b / (1u64 << 20) as f64),
        n => format!("{:.1} KiB", n as f64 / 1024.0),
    }
}
