//! `tensorfold bench cache`: time to first token of a long prompt new to the server, then of the same prompt resumed.

use std::hash::BuildHasher;

use anyhow::bail;
use clap::Args;
use serde_json::{Value, json};

use super::client::{Client, Reply, ServerArgs};
use super::decode::short;
use super::prompts;

#[derive(Args)]
pub struct CacheArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Refuse to report (exit non-zero) unless the server says none of the first request's prompt was cached.
    #[arg(long)]
    require_cold: bool,
    /// Tokens generated per request.
    #[arg(long, default_value_t = 8)]
    max_tokens: usize,
    /// Text put before the long prompt so the server has not seen it; default: a new random one each run.
    #[arg(long)]
    nonce: Option<String>,
}

const SEED: u64 = 1;

pub async fn run(a: CacheArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.max_tokens >= 1, "--max-tokens must be at least 1");
    let client = Client::connect(&a.server).await?;
    let nonce = a.nonce.clone().unwrap_or_else(random_nonce);
    let prompt = format!("Reference {nonce}.\n\n{}", prompts::long().text);
    let body = client.body(&prompt, a.max_tokens, 0.0, SEED);
    let cold = client.stream(&body).await?;
    let verified = match cold.cached() {
        Some(0) => Some(true),
        Some(n) if a.require_cold => bail!(
            "the server says {n} of the first request's {} prompt tokens came from its cache, so it was not cold; \
             nothing reported (the nonce `{nonce}` reached it before: drop --nonce to get a fresh random one)",
            cold.prompt_tokens.map_or("?".into(), |p| p.to_string())
        ),
        Some(_) => Some(false),
        None if a.require_cold => bail!(
            "the server reports no cached-token count (neither usage.prompt_tokens_details.cached_tokens nor \
             tensorfold.cached_tokens), so a cold start cannot be verified; drop --require-cold to report it unverified"
        ),
        None => None,
    };
    let resumed = client.stream(&body).await?;
    let ratio = match (cold.ttft(), resumed.ttft()) {
        (Some(c), Some(r)) if r > 0.0 => Some(c / r),
        _ => None,
    };
    let same = match (&cold.token_sha, &resumed.token_sha) {
        (Some(c), Some(r)) => Some(c == r),
        _ => None,
    };
    if a.server.json {
        let out = json!({
            "bench": "cache", "url": a.server.url, "model": client.model, "nonce": nonce, "max_tokens": a.max_tokens,
            "cold_verified": verified, "cold": side(&cold), "resumed": side(&resumed), "ttft_ratio": ratio,
            "same_token_sha": same,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&client, &a, &nonce, &cold, &resumed, verified, ratio, same);
    }
    if same == Some(false) {
        bail!(
            "the resumed prompt gave token_sha {} but the cold one gave {}: a resumed prompt must equal a fresh one",
            resumed.token_sha.as_deref().unwrap_or_default(),
            cold.token_sha.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn print_table(
    client: &Client,
    a: &CacheArgs,
    nonce: &str,
    cold: &Reply,
    resumed: &Reply,
    verified: Option<bool>,
    ratio: Option<f64>,
    same: Option<bool>,
) {
    println!(
        "cache: {} at {}, the long prompt behind the nonce `{nonce}`, {} tokens generated, temperature 0",
        client.model, a.server.url, a.max_tokens
    );
    println!(
        "{:<8} {:>13} {:>13} {:>10} {:>10}",
        "request", "prompt tokens", "cached tokens", "TTFT ms", "total ms"
    );
    for (name, r) in [("cold", cold), ("resumed", resumed)] {
        println!(
            "{name:<8} {:>13} {:>13} {:>10} {:>10.1}",
            r.prompt_tokens.map_or("n/a".into(), |n| n.to_string()),
            r.cached().map_or("unavailable".into(), |n| n.to_string()),
            r.ttft().map_or("n/a".into(), |t| format!("{:.1}", t * 1e3)),
            r.end * 1e3
        );
    }
    match verified {
        Some(true) => println!("cold start verified: the server says no prompt token of the first request was cached"),
        Some(false) => println!("NOT a cold start: the server says part of the first request's prompt was cached"),
        None => println!("cold start unverified: the server reports no cached-token count"),
    }
    if let Some(r) = ratio {
        println!("resumed time to first token: {r:.2}x faster than cold");
    }
    match (same, &cold.token_sha) {
        (Some(true), Some(s)) => println!("token_sha {}: the same cold and resumed", short(s)),
        (Some(false), _) => println!("token_sha DIFFERS between the cold and the resumed request"),
        _ => println!("token_sha: unavailable (no `tensorfold` object)"),
    }
}

fn side(r: &Reply) -> Value {
    json!({
        "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached(), "usage_cached_tokens": r.usage_cached,
        "tensorfold_cached_tokens": r.ext_cached, "ttft_s": r.ttft(), "end_s": r.end,
        "completion_tokens": r.completion_tokens, "token_sha": r.token_sha,
    })
}

/// 64 random bits in hex, from the standard library's per-process random hash keys.
fn random_nonce() -> String {
    let h = std::collections::hash_map::RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()));
    format!("{h:016x}")
}
