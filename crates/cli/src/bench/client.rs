//! A small OpenAI-compatible client: streamed completions with the arrival time of every event.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use clap::Args;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::sse::SseParser;

/// Runs a benchmark on a one-thread runtime, leaving the other cores to a server on the same machine.
pub fn block_on(f: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(f)
}

/// The flags every HTTP benchmark takes.
#[derive(Args, Clone)]
pub struct ServerArgs {
    /// Base URL of an OpenAI-compatible server (TensorFold, vLLM, SGLang, llama.cpp); http only.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Model id to request; default: the first one the server's /v1/models lists.
    #[arg(long)]
    pub model: Option<String>,
    /// Bearer key for a server that needs one.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A connection to one server and model.
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
    pub model: String,
}

impl Client {
    /// Checks the URL and resolves the model id (asking /v1/models when none was given).
    pub async fn connect(a: &ServerArgs) -> anyhow::Result<Client> {
        let base = a.url.trim_end_matches('/').trim_end_matches("/v1").to_string();
        if !base.starts_with("http://") {
            bail!(
                "--url must start with http:// (this build speaks plain HTTP), got `{}`",
                a.url
            );
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .context("building the HTTP client")?;
        let mut c = Client {
            http,
            base,
            key: a.api_key.clone(),
            model: String::new(),
        };
        c.model = match &a.model {
            Some(m) => m.clone(),
            None => c.first_model().await?,
        };
        Ok(c)
    }

    fn request(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    async fn first_model(&self) -> anyhow::Result<String> {
        let url = format!("{}/v1/models", self.base);
        let r =
            self.request(self.http.get(&url)).send().await.with_context(|| {
                format!("reaching {url}; is the server running? (start one with `tensorfold serve`)")
            })?;
        let v = ok_json(r, &url).await?;
        v["data"][0]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("{url} lists no model; pass --model ID"))
    }

    /// A streamed completion request for `prompt`: usage included, EOS ignored so every reply runs its length.
    pub fn body(&self, prompt: &str, max_tokens: usize, temperature: f64, seed: u64) -> Value {
        json!({
            "model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
            "seed": seed, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
        })
    }

    /// Sends a streamed completion and times every event until the stream ends.
    pub async fn stream(&self, body: &Value) -> anyhow::Result<Reply> {
        let url = format!("{}/v1/completions", self.base);
        let start = Instant::now();
        let r = self
            .request(self.http.post(&url))
            .json(body)
            .send()
            .await
            .with_context(|| format!("sending to {url}; is the server running?"))?;
        if !r.status().is_success() {
            return Err(ok_json(r, &url).await.expect_err("a failure status is an error"));
        }
        let mut reply = Reply::default();
        let mut parser = SseParser::default();
        let mut bytes = r.bytes_stream();
        let mut finished = false;
        'read: while let Some(piece) = bytes.next().await {
            let piece = piece.with_context(|| format!("reading the stream from {url}"))?;
            let at = start.elapsed().as_secs_f64();
            for data in parser.push(&piece) {
                if data == "[DONE]" {
                    finished = true;
                    break 'read;
                }
                let v: Value = serde_json::from_str(&data)
                    .with_context(|| format!("a streamed event from {url} is not JSON: {data}"))?;
                finished |= reply.event(&v, at)?;
            }
        }
        reply.end = start.elapsed().as_secs_f64();
        if !finished {
            bail!("the stream from {url} ended before the reply finished");
        }
        Ok(reply)
    }
}

/// The JSON body of a successful reply, or the server's error message with the status.
async fn ok_json(r: reqwest::Response, url: &str) -> anyhow::Result<Value> {
    let status = r.status();
    let text = r.text().await.unwrap_or_default();
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let msg = v["error"]["message"].as_str().unwrap_or(text.as_str());
        let hint = if status.as_u16() == 401 {
            " (pass --api-key)"
        } else {
            ""
        };
        bail!("{url} answered {status}: {msg}{hint}");
    }
    if v.is_null() {
        bail!("{url} did not answer JSON: {text}");
    }
    Ok(v)
}

/// One streamed reply: event times in seconds from sending, and what the closing events said.
#[derive(Default, Debug)]
pub struct Reply {
    /// Arrival of every event that carried text.
    pub text_times: Vec<f64>,
    /// Arrival of the event with the finish reason.
    pub finish_at: Option<f64>,
    /// End of the stream.
    pub end: f64,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// `usage.prompt_tokens_details.cached_tokens`, where the server reports it.
    pub usage_cached: Option<usize>,
    /// `tensorfold.cached_tokens`, where the server sends the extension.
    pub ext_cached: Option<usize>,
    /// `tensorfold.token_sha`, where the server sends the extension.
    pub token_sha: Option<String>,
    /// `tensorfold.drafted` and `tensorfold.accepted`: draft tokens proposed and kept.
    pub drafts: Option<(usize, usize)>,
}

fn count(v: &Value) -> Option<usize> {
    v.as_u64().map(|x| x as usize)
}

impl Reply {
    /// Takes in one event; true when it carried the finish reason.
    fn event(&mut self, v: &Value, at: f64) -> anyhow::Result<bool> {
        if let Some(e) = v.get("error") {
            bail!(
                "the server failed mid-stream: {}",
                e["message"].as_str().unwrap_or(&e.to_string())
            );
        }
        let mut finished = false;
        if let Some(ch) = v["choices"].get(0) {
            let text = ch["text"]
                .as_str()
                .or_else(|| ch["delta"]["content"].as_str())
                .unwrap_or("");
            if !text.is_empty() {
                self.text_times.push(at);
            }
            if let Some(r) = ch["finish_reason"].as_str() {
                self.finish_reason = Some(r.to_string());
                self.finish_at = Some(at);
                finished = true;
            }
        }
        let u = &v["usage"];
        if u.is_object() {
            self.prompt_tokens = count(&u["prompt_tokens"]).or(self.prompt_tokens);
            self.completion_tokens = count(&u["completion_tokens"]).or(self.completion_tokens);
            self.usage_cached = count(&u["prompt_tokens_details"]["cached_tokens"]).or(self.usage_cached);
        }
        let ext = &v["tensorfold"];
        if ext.is_object() {
            self.token_sha = ext["token_sha"].as_str().map(str::to_string).or(self.token_sha.take());
            self.ext_cached = count(&ext["cached_tokens"]).or(self.ext_cached);
            if let (Some(d), Some(a)) = (count(&ext["drafted"]), count(&ext["accepted"])) {
                self.drafts = Some((d, a));
            }
        }
        Ok(finished)
    }

    /// Prompt tokens the server says it took from its cache: the larger of its two reports, None if it gave neither.
    pub fn cached(&self) -> Option<usize> {
        self.usage_cached.max(self.ext_cached)
    }

    /// Seconds to the first text.
    pub fn ttft(&self) -> Option<f64> {
        self.text_times.first().copied()
    }

    /// Gaps between successive text events (one token each, unless the server held text back and sent it together).
    pub fn gaps(&self) -> Vec<f64> {
        self.text_times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Generated tokens after the first per second from the first text to the finish reason; None without usage.
    pub fn decode_rate(&self) -> Option<f64> {
        let n = self.completion_tokens?;
        let span = self.finish_at.unwrap_or(self.end) - self.ttft()?;
        (n > 1 && span > 0.0).then(|| (n - 1) as f64 / span)
    }
}
