//! `tensorfold generate`: one prompt through the engine's lane rounds, streaming the text as it is produced.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, anyhow};
use clap::Args;
use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{DraftConfig, Engine, EngineConfig, Event, GenerateParams, Usage};
use tensorfold_model::dsv4::forward::device::DeviceSpec;
use tensorfold_model::tokenizer::{TextStream, Tokenizer};

use crate::default_model;

#[derive(Args)]
pub struct GenerateArgs {
    /// Checkpoint folder; the built-in tensorfold-demo model when omitted.
    #[arg(long)]
    model: Option<PathBuf>,
    /// The text to continue (or, with --chat, the user's message).
    #[arg(long)]
    prompt: String,
    /// Wrap the prompt in the model's chat format and stop at the end of the assistant's turn.
    #[arg(long)]
    chat: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Sampling temperature (0 = greedy); default from generation_config.json, else 1.
    #[arg(long)]
    temperature: Option<f32>,
    /// Nucleus cut; default from generation_config.json, else 1.
    #[arg(long)]
    top_p: Option<f32>,
    /// Keep only the k most likely tokens (0 = off).
    #[arg(long, default_value_t = 0)]
    top_k: u32,
    /// Sampling key; the same seed and prompt give the same text. Default: a hash of the prompt.
    #[arg(long)]
    seed: Option<u64>,
    /// CPU threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Where the model runs: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: DeviceSpec,
    #[command(flatten)]
    ranks: crate::ranks::RankArgs,
    /// Keep generating past the end-of-sequence token.
    #[arg(long)]
    ignore_eos: bool,
    /// Print rounds, drafts, acceptance, tokens per round, tokens per second and token_sha to stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Generate without drafts (the serial reference; the tokens are the same).
    #[arg(long)]
    no_drafts: bool,
    /// Model drafts per round: chained MTP (V4) or a DSpark block, at most 5 (V4.1); 0 drafts by context copies only.
    #[arg(long, default_value_t = DraftConfig::default().mtp_drafts)]
    mtp_drafts: usize,
    /// KV cache memory in GiB (every sequence's state lives in its blocks); default: 8192 blocks; the pool gets as many 128-token blocks as fit.
    #[arg(long)]
    kv_cache_gib: Option<f64>,
}

/// Bytes of a `--kv-cache-gib` value.
pub fn gib_bytes(gib: f64) -> anyhow::Result<u64> {
    if !(gib.is_finite() && gib > 0.0) {
        anyhow::bail!("--kv-cache-gib is {gib}; give a positive size in GiB, such as 0.5");
    }
    Ok((gib * (1u64 << 30) as f64) as u64)
}

/// What the sink saw: tokens so far, when the first and the latest arrived.
#[derive(Default)]
struct Progress {
    tokens: usize,
    first: Option<Instant>,
    last: Option<Instant>,
}

/// How the request ended: finish reason, token_sha and usage, or the error.
type Outcome = Result<(String, String, Usage), String>;

fn generation_defaults(dir: &std::path::Path) -> (Option<f32>, Option<f32>) {
    let Ok(text) = std::fs::read_to_string(dir.join("generation_config.json")) else {
        return (None, None);
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let get = |k: &str| v.get(k).and_then(|x| x.as_f64()).map(|x| x as f32);
    (get("temperature"), get("top_p"))
}

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let dir = match &args.model {
        Some(d) => d.clone(),
        None => default_model::dir()?,
    };
    let loaded = tensorfold_engine::ranks::load(&dir, args.device, args.threads, &args.ranks.options())
        .map_err(|e| anyhow!(e))
        .with_context(|| format!("loading {}", dir.display()))?;
    let tok = Tokenizer::load(&dir, loaded.bos_token_id, loaded.eos_token_id)?;
    let text = if args.chat {
        format!("<｜User｜>{}<｜Assistant｜></think>", args.prompt)
    } else {
        args.prompt.clone()
    };
    let mut prompt = vec![tok.bos_id];
    prompt.extend(tok.encode(&text).map_err(|e| anyhow!(e))?);
    let (t_default, p_default) = generation_defaults(&dir);
    let sampling = SamplingParams {
        temperature: args.temperature.or(t_default).unwrap_or(1.0),
        top_p: args.top_p.or(p_default).unwrap_or(1.0),
        top_k: args.top_k,
        min_p: 0.0,
    };
    let params = GenerateParams {
        sampling,
        seed: args.seed,
        max_tokens: args.max_tokens,
        stop_token_ids: vec![tok.eos_id],
        ignore_eos: args.ignore_eos,
        ..Default::default()
    };
    let drafts = if args.no_drafts {
        DraftConfig::off()
    } else {
        DraftConfig {
            mtp_drafts: args.mtp_drafts,
            ..DraftConfig::default()
        }
    };
    let cfg = EngineConfig {
        drafts,
        pool_blocks: match args.kv_cache_gib {
            Some(gib) => loaded.runner.layout().blocks_in(gib_bytes(gib)?),
            None => EngineConfig::default().pool_blocks,
        },
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(loaded.runner, cfg);
    let tok = Arc::new(tok);
    let done: Arc<Mutex<Option<Outcome>>> = Arc::new(Mutex::new(None));
    let progress: Arc<Mutex<Progress>> = Arc::default();
    let (sink_tok, sink_done, sink_progress) = (tok.clone(), done.clone(), progress.clone());
    let mut stream = TextStream::default();
    let eos = tok.eos_id;
    let start = Instant::now();
    engine
        .submit(
            prompt,
            params,
            Box::new(move |ev| match ev {
                Event::Token { id, .. } => {
                    let mut p = sink_progress.lock().unwrap();
                    let now = Instant::now();
                    p.tokens += 1;
                    p.first.get_or_insert(now);
                    p.last = Some(now);
                    if id == eos {
                        return;
                    }
                    if let Ok(delta) = stream.push(&sink_tok, id) {
                        print!("{delta}");
                        let _ = std::io::stdout().flush();
                    }
                }
                Event::Finished {
                    reason,
                    usage,
                    token_sha,
                } => {
                    *sink_done.lock().unwrap() = Some(Ok((reason.as_str().to_string(), token_sha, usage)));
                }
                Event::Error(e) => *sink_done.lock().unwrap() = Some(Err(e)),
            }),
        )
        .map_err(|e| anyhow!(e))?;
    let mut decode_rounds = 0;
    while engine.has_work() {
        let before = progress.lock().unwrap().tokens;
        engine.step();
        if before > 0 && progress.lock().unwrap().tokens > before {
            decode_rounds += 1;
        }
    }
    println!();
    let outcome = done
        .lock()
        .unwrap()
        .take()
        .ok_or_else(|| anyhow!("the request ended without finishing"))?;
    let (reason, sha, usage) = outcome.map_err(|e| anyhow!(e))?;
    if args.stats {
        let s = engine.stats();
        let secs = start.elapsed().as_secs_f64();
        let n = usage.completion_tokens;
        let p = progress.lock().unwrap();
        let decode_secs = match (p.first, p.last) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => 0.0,
        };
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        eprintln!(
            "finish_reason {reason}; {n} tokens in {secs:.2} s ({:.1} tokens/s), {} rounds; token_sha {sha}",
            ratio(n as f64, secs),
            s.rounds
        );
        eprintln!(
            "drafted {}, accepted {} (acceptance {:.1}%); {:.2} tokens per decode round ({decode_rounds} rounds); decode {:.1} tokens/s",
            usage.drafted,
            usage.accepted,
            100.0 * ratio(usage.accepted as f64, usage.drafted as f64),
            ratio(n.saturating_sub(1) as f64, decode_rounds as f64),
            ratio(n.saturating_sub(1) as f64, decode_secs)
        );
    }
    Ok(())
}
