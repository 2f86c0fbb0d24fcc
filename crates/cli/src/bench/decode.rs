//! `tensorfold bench decode`: one stream at a time, decode tokens/s and inter-token latency over the shipped prompts.

use clap::Args;
use serde_json::{Value, json};

use super::client::{Client, Reply, ServerArgs};
use super::prompts::{self, Prompt};
use super::stats::{Spread, cell, percentile};

#[derive(Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Measured runs per prompt.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Unmeasured runs per prompt before the measured ones.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Tokens generated per run (EOS is ignored, so every run generates this many).
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Prompts to run, comma-separated (short, code, long); default all.
    #[arg(long, value_delimiter = ',')]
    prompts: Vec<String>,
}

/// Greedy decoding with a fixed seed: every run of a prompt asks for the same tokens.
const SEED: u64 = 1;

/// One prompt's measured runs.
struct Row {
    prompt: &'static Prompt,
    runs: Vec<Reply>,
}

impl Row {
    fn rates(&self) -> Option<Spread> {
        Spread::of(&self.runs.iter().filter_map(Reply::decode_rate).collect::<Vec<_>>())
    }

    fn ttfts(&self) -> Option<Spread> {
        Spread::of(&self.runs.iter().filter_map(Reply::ttft).collect::<Vec<_>>())
    }

    fn gaps(&self) -> Vec<f64> {
        self.runs.iter().flat_map(Reply::gaps).collect()
    }

    /// The runs' token_sha when every run sent one; whether they all agree.
    fn sha(&self) -> Option<(String, bool)> {
        let shas: Option<Vec<&String>> = self.runs.iter().map(|r| r.token_sha.as_ref()).collect();
        let shas = shas?;
        let first = (*shas.first()?).clone();
        let same = shas.iter().all(|s| **s == first);
        Some((first, same))
    }

    /// Draft tokens proposed and kept over every run, when every run reported them.
    fn drafts(&self) -> Option<(usize, usize)> {
        let each: Option<Vec<(usize, usize)>> = self.runs.iter().map(|r| r.drafts).collect();
        each.map(|v| v.iter().fold((0, 0), |(d, a), &(x, y)| (d + x, a + y)))
    }

    fn json(&self) -> Value {
        let gaps = self.gaps();
        let sha = self.sha();
        let runs: Vec<Value> = self
            .runs
            .iter()
            .map(|r| {
                json!({"decode_tokens_per_s": r.decode_rate(), "ttft_s": r.ttft(), "end_s": r.end,
                       "completion_tokens": r.completion_tokens, "text_events": r.text_times.len(),
                       "token_sha": r.token_sha, "drafted": r.drafts.map(|d| d.0), "accepted": r.drafts.map(|d| d.1)})
            })
            .collect();
        json!({
            "prompt": self.prompt.name, "prompt_tokens": self.runs[0].prompt_tokens,
            "completion_tokens": self.runs[0].completion_tokens,
            "decode_tokens_per_s": self.rates().map(|s| s.json()), "ttft_s": self.ttfts().map(|s| s.json()),
            "itl_s": {"p50": percentile(&gaps, 50.0), "p90": percentile(&gaps, 90.0), "p99": percentile(&gaps, 99.0)},
            "token_sha": sha.as_ref().map(|s| &s.0), "token_sha_same_every_run": sha.as_ref().map(|s| s.1),
            "drafted": self.drafts().map(|d| d.0), "accepted": self.drafts().map(|d| d.1),
            "runs": runs,
        })
    }
}

pub async fn run(a: DecodeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    anyhow::ensure!(
        a.max_tokens >= 2,
        "--max-tokens must be at least 2 to time a decode step"
    );
    let chosen = prompts::pick(&a.prompts)?;
    let client = Client::connect(&a.server).await?;
    let mut rows = Vec::new();
    for prompt in chosen {
        let body = client.body(prompt.text, a.max_tokens, 0.0, SEED);
        for _ in 0..a.warmup {
            client.stream(&body).await?;
        }
        let mut runs = Vec::new();
        for _ in 0..a.runs {
            runs.push(client.stream(&body).await?);
        }
        rows.push(Row { prompt, runs });
    }
    if a.server.json {
        let out = json!({
            "bench": "decode", "url": a.server.url, "model": client.model, "runs": a.runs, "warmup": a.warmup,
            "max_tokens": a.max_tokens, "temperature": 0.0, "seed": SEED,
            "prompts": rows.iter().map(Row::json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "decode: {} at {}, one stream, {} measured runs of {} tokens per prompt after {} warmup, temperature 0",
        client.model, a.server.url, a.runs, a.max_tokens, a.warmup
    );
    println!("median (min-max) over runs; inter-token latency (ITL, ms) percentiles over every gap of every run");
    println!(
        "{:<6} {:>7} {:>7} {:>22} {:>22} {:>8} {:>8} {:>8}  token_sha",
        "prompt", "in tok", "out tok", "decode tokens/s", "TTFT ms", "ITL p50", "p90", "p99"
    );
    for r in &rows {
        let gaps = r.gaps();
        let sha = match r.sha() {
            None => "unavailable (no `tensorfold` object)".to_string(),
            Some((s, true)) => format!("{}, same every run", short(&s)),
            Some((s, false)) => format!("{}, DIFFERS between runs", short(&s)),
        };
        let sha = match r.drafts() {
            Some((d, acc)) => format!("{sha}; drafted {d}, accepted {acc}"),
            None => sha,
        };
        println!(
            "{:<6} {:>7} {:>7} {:>22} {:>22} {:>8} {:>8} {:>8}  {sha}",
            r.prompt.name,
            r.runs[0].prompt_tokens.map_or("n/a".into(), |n| n.to_string()),
            r.runs[0].completion_tokens.map_or("n/a".into(), |n| n.to_string()),
            r.rates().map_or("n/a (no usage)".into(), |s| s.show(1.0, 1)),
            r.ttfts().map_or("n/a".into(), |s| s.show(1e3, 1)),
            cell(percentile(&gaps, 50.0), 1e3, 1),
            cell(percentile(&gaps, 90.0), 1e3, 1),
            cell(percentile(&gaps, 99.0), 1e3, 1),
        );
    }
    Ok(())
}

/// The first and last 8 hex digits of a token_sha.
pub fn short(sha: &str) -> String {
    if sha.len() > 20 {
        format!("{}...{}", &sha[..8], &sha[sha.len() - 8..])
    } else {
        sha.to_string()
    }
}
