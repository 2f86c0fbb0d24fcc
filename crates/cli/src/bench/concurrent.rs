//! `tensorfold bench concurrent`: one request set alone and at several concurrencies, every token_sha compared.

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::client::{Client, Reply, ServerArgs};
use super::prompts;
use super::stats::{cell, percentile};

#[derive(Args)]
pub struct ConcurrentArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// First send every request alone, one after another: the reference the other runs are compared with.
    #[arg(long)]
    alone: bool,
    /// Also send every request alone with `"draft": false`, TensorFold's serial reference.
    #[arg(long)]
    serial: bool,
    /// Requests in flight at once, comma-separated; each level sends the whole set.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32, 64])]
    concurrency: Vec<usize>,
    /// Requests in the set; default: the largest concurrency.
    #[arg(long)]
    requests: Option<usize>,
    /// Tokens generated per request (EOS is ignored).
    #[arg(long, default_value_t = 32)]
    max_tokens: usize,
}

/// The temperatures the set cycles through; every request has its own seed.
const TEMPERATURES: [f64; 4] = [0.0, 0.7, 1.0, 1.3];

/// One request of the set.
struct Req {
    name: String,
    body: Value,
}

/// One pass of the whole set.
struct Phase {
    label: String,
    concurrency: usize,
    wall: f64,
    replies: Vec<Reply>,
}

impl Phase {
    fn tokens(&self) -> Option<usize> {
        self.replies.iter().map(|r| r.completion_tokens).sum()
    }

    /// Draft tokens proposed and kept over the pass, when every reply reported them.
    fn drafts(&self) -> Option<(usize, usize)> {
        let each: Option<Vec<(usize, usize)>> = self.replies.iter().map(|r| r.drafts).collect();
        each.map(|v| v.iter().fold((0, 0), |(d, a), &(x, y)| (d + x, a + y)))
    }

    fn latencies(&self) -> Vec<f64> {
        self.replies.iter().map(|r| r.end).collect()
    }

    fn ttfts(&self) -> Vec<f64> {
        self.replies.iter().filter_map(Reply::ttft).collect()
    }

    fn json(&self, set: &[Req], mismatched: &[usize]) -> Value {
        let lat = self.latencies();
        let ttft = self.ttfts();
        let tokens = self.tokens();
        let requests: Vec<Value> = self
            .replies
            .iter()
            .zip(set)
            .map(|(r, q)| {
                json!({"request": q.name, "latency_s": r.end, "ttft_s": r.ttft(),
                       "completion_tokens": r.completion_tokens, "token_sha": r.token_sha,
                       "drafted": r.drafts.map(|d| d.0), "accepted": r.drafts.map(|d| d.1)})
            })
            .collect();
        json!({
            "phase": self.label, "concurrency": self.concurrency, "wall_s": self.wall, "completion_tokens": tokens,
            "tokens_per_s": tokens.map(|t| t as f64 / self.wall),
            "latency_s": {"p50": percentile(&lat, 50.0), "p90": percentile(&lat, 90.0), "max": percentile(&lat, 100.0)},
            "ttft_s": {"p50": percentile(&ttft, 50.0), "p90": percentile(&ttft, 90.0), "max": percentile(&ttft, 100.0)},
            "token_sha_mismatches": mismatched.iter().map(|&i| &set[i].name).collect::<Vec<_>>(),
            "drafted": self.drafts().map(|d| d.0), "accepted": self.drafts().map(|d| d.1),
            "requests": requests,
        })
    }
}

fn request_set(client: &Client, n: usize, max_tokens: usize) -> Vec<Req> {
    (0..n)
        .map(|i| {
            let p = &prompts::ALL[i % prompts::ALL.len()];
            let t = TEMPERATURES[i % TEMPERATURES.len()];
            let seed = 1000 + i as u64;
            Req {
                name: format!("#{i} ({}, temperature {t}, seed {seed})", p.name),
                body: client.body(p.text, max_tokens, t, seed),
            }
        })
        .collect()
}

/// Sends the whole set with `concurrency` requests in flight, each body patched by `patch`.
async fn pass(client: &Client, set: &[Req], label: String, concurrency: usize, patch: &Value) -> anyhow::Result<Phase> {
    let start = Instant::now();
    let sends = futures_util::stream::iter(set.iter().enumerate())
        .map(|(i, q)| {
            let mut body = q.body.clone();
            if let (Some(b), Some(p)) = (body.as_object_mut(), patch.as_object()) {
                b.extend(p.clone());
            }
            async move { (i, client.stream(&body).await) }
        })
        .buffer_unordered(concurrency);
    let done: Vec<(usize, anyhow::Result<Reply>)> = sends.collect().await;
    let wall = start.elapsed().as_secs_f64();
    let mut replies: Vec<Option<Reply>> = (0..set.len()).map(|_| None).collect();
    for (i, r) in done {
        replies[i] = Some(r.with_context(|| format!("request {} in the `{label}` run", set[i].name))?);
    }
    Ok(Phase {
        label,
        concurrency,
        wall,
        replies: replies
            .into_iter()
            .map(|r| r.expect("every request answered"))
            .collect(),
    })
}

pub async fn run(a: ConcurrentArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !a.concurrency.is_empty() && a.concurrency.iter().all(|&c| c >= 1),
        "--concurrency takes levels of at least 1, e.g. 1,8,32,64"
    );
    anyhow::ensure!(a.max_tokens >= 1, "--max-tokens must be at least 1");
    let n = a
        .requests
        .unwrap_or(*a.concurrency.iter().max().expect("checked non-empty"));
    anyhow::ensure!(n >= 1, "--requests must be at least 1");
    let client = Client::connect(&a.server).await?;
    let set = request_set(&client, n, a.max_tokens);
    let mut phases = Vec::new();
    if a.alone {
        phases.push(pass(&client, &set, "alone".into(), 1, &json!({})).await?);
    }
    if a.serial {
        phases.push(pass(&client, &set, "serial (draft off)".into(), 1, &json!({"draft": false})).await?);
    }
    for &c in &a.concurrency {
        phases.push(pass(&client, &set, format!("concurrency {c}"), c, &json!({})).await?);
    }
    let reference = &phases[0];
    let have_sha = reference.replies.iter().all(|r| r.token_sha.is_some());
    let mut mismatches: Vec<String> = Vec::new();
    let mut per_phase: Vec<Vec<usize>> = Vec::new();
    for p in &phases {
        let mut bad = Vec::new();
        for (i, (r, base)) in p.replies.iter().zip(&reference.replies).enumerate() {
            if have_sha && r.token_sha != base.token_sha {
                bad.push(i);
                mismatches.push(format!(
                    "request {}: token_sha {} in the `{}` run but {} in the `{}` run",
                    set[i].name,
                    r.token_sha.as_deref().unwrap_or("(none)"),
                    p.label,
                    base.token_sha.as_deref().unwrap_or("(none)"),
                    reference.label
                ));
            }
        }
        per_phase.push(bad);
    }
    if a.server.json {
        let out = json!({
            "bench": "concurrent", "url": a.server.url, "model": client.model, "requests": n,
            "max_tokens": a.max_tokens, "reference": reference.label,
            "token_sha_checked": have_sha, "token_sha_mismatches": mismatches.len(),
            "phases": phases.iter().zip(&per_phase).map(|(p, bad)| p.json(&set, bad)).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&client, &a, n, &phases, &per_phase, have_sha);
    }
    if !mismatches.is_empty() {
        for m in &mismatches {
            eprintln!("MISMATCH {m}");
        }
        bail!(
            "token_sha differs for {} request runs; the first: {}",
            mismatches.len(),
            mismatches[0]
        );
    }
    Ok(())
}

fn print_table(client: &Client, a: &ConcurrentArgs, n: usize, phases: &[Phase], bad: &[Vec<usize>], have_sha: bool) {
    println!(
        "concurrent: {} at {}, {n} requests of {} tokens (prompts short/code/long, temperatures 0/0.7/1/1.3, seeds 1000+)",
        client.model, a.server.url, a.max_tokens
    );
    println!("latency is each request's time from sending to the end of its stream");
    println!(
        "{:<20} {:>5} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  token_sha vs `{}`",
        "run",
        "conc",
        "wall s",
        "tokens",
        "tokens/s",
        "lat p50",
        "lat p90",
        "lat max",
        "TTFT p50",
        "TTFT p90",
        phases[0].label
    );
    for (i, (p, bad)) in phases.iter().zip(bad).enumerate() {
        let lat = p.latencies();
        let ttft = p.ttfts();
        let sha = match (have_sha, i) {
            (false, _) => "unavailable (no `tensorfold` object)".to_string(),
            (true, 0) => "reference".to_string(),
            (true, _) if bad.is_empty() => format!("{n}/{n} same"),
            (true, _) => format!("{} of {n} DIFFER", bad.len()),
        };
        println!(
            "{:<20} {:>5} {:>8.2} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {sha}",
            p.label,
            p.concurrency,
            p.wall,
            p.tokens().map_or("n/a".into(), |t| t.to_string()),
            cell(p.tokens().map(|t| t as f64 / p.wall), 1.0, 1),
            cell(percentile(&lat, 50.0), 1e3, 0),
            cell(percentile(&lat, 90.0), 1e3, 0),
            cell(percentile(&lat, 100.0), 1e3, 0),
            cell(percentile(&ttft, 50.0), 1e3, 0),
            cell(percentile(&ttft, 90.0), 1e3, 0),
        );
    }
    println!("latencies and TTFT in ms; every request's figures and token_sha with --json");
}
