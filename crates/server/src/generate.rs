//! One generation: request fields to engine parameters, submission, and the events turned into text pieces.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tensorfold_engine::sampler::SamplingParams;
use tensorfold_engine::{Event, GenerateParams, RequestId, token_sha};
use tensorfold_model::tokenizer::TextStream;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::error::ApiError;
use crate::logprobs::Entry;
use crate::params::{self, Obj};
use crate::state::AppState;
use crate::stop::StopMatcher;

/// What a request asks for beyond its prompt.
pub struct Ask {
    pub params: GenerateParams,
    pub stops: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
}

/// 400 unless the request names this server's model (or none).
pub fn check_model(st: &AppState, o: &Obj) -> Result<(), ApiError> {
    if let Some(name) = params::string(o, "model")?
        && name != st.cfg.name
    {
        return Err(ApiError::bad(
            Some("model"),
            format!(
                "the model `{name}` does not exist; this server serves `{}`",
                st.cfg.name
            ),
        ));
    }
    Ok(())
}

/// Reads and checks the generation fields; max_tokens defaults to 16 (completions) or what fits (chat).
pub fn ask(st: &AppState, o: &Obj, prompt_len: usize, chat: bool) -> Result<Ask, ApiError> {
    let m = st.model()?;
    check_model(st, o)?;
    if let Some(n) = params::uint(o, "n")? {
        if n != 1 {
            return Err(ApiError::bad(Some("n"), format!("`n` must be 1, got {n}")));
        }
    } else if o.get("n").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad(Some("n"), "`n` must be 1"));
    }
    let logprobs = crate::logprobs::asked(o, chat)?;
    let temperature = params::ranged(o, "temperature", 0.0, 100.0)?.map_or(m.temperature, |x| x as f32);
    let top_p = match params::num(o, "top_p")? {
        Some(x) if !(x > 0.0 && x <= 1.0) => {
            return Err(ApiError::bad(
                Some("top_p"),
                format!("`top_p` must be in (0, 1], got {x}"),
            ));
        }
        x => x.map_or(m.top_p, |x| x as f32),
    };
    let top_k = match params::num(o, "top_k")? {
        None => 0,
        Some(-1.0) => 0,
        Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= u32::MAX as f64 => x as u32,
        Some(x) => {
            return Err(ApiError::bad(
                Some("top_k"),
                format!("`top_k` must be -1, 0 or a positive integer, got {x}"),
            ));
        }
    };
    let min_p = params::ranged(o, "min_p", 0.0, 1.0)?.unwrap_or(0.0) as f32;
    let seed = match params::num(o, "seed")? {
        None => None,
        Some(x) if x.fract() == 0.0 && x.abs() < 9.0e18 => Some(x as i64 as u64),
        Some(x) => {
            return Err(ApiError::bad(
                Some("seed"),
                format!("`seed` must be an integer, got {x}"),
            ));
        }
    };
    let asked = match params::uint(o, "max_completion_tokens")? {
        Some(x) => Some(x),
        None => params::uint(o, "max_tokens")?,
    };
    let room = m.context.saturating_sub(prompt_len);
    if prompt_len >= m.context {
        return Err(ApiError::bad(
            Some(if chat { "messages" } else { "prompt" }),
            format!(
                "the prompt has {prompt_len} tokens but the context holds {}; at most {} prompt tokens fit",
                m.context,
                m.context - 1
            ),
        ));
    }
    let max_tokens = match asked {
        Some(0) => return Err(ApiError::bad(Some("max_tokens"), "`max_tokens` must be at least 1")),
        Some(x) if x as usize > room => {
            return Err(ApiError::bad(
                Some("max_tokens"),
                format!(
                    "the prompt ({prompt_len} tokens) plus max_tokens ({x}) is over the context of {} tokens; lower max_tokens to {room} or shorten the prompt",
                    m.context
                ),
            ));
        }
        Some(x) if x as usize > st.cfg.max_tokens => {
            return Err(ApiError::bad(
                Some("max_tokens"),
                format!("`max_tokens` is at most {} on this server, got {x}", st.cfg.max_tokens),
            ));
        }
        Some(x) => x as usize,
        None if chat => st.cfg.max_tokens.min(room),
        None => 16.min(room),
    };
    let ignore_eos = params::boolean(o, "ignore_eos")?.unwrap_or(false);
    let draft = params::boolean(o, "draft")?.unwrap_or(true) && st.cfg.drafts;
    let stream = params::boolean(o, "stream")?.unwrap_or(false);
    let include_usage = match o.get("stream_options") {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Object(so)) => params::boolean(so, "include_usage")?.unwrap_or(false),
        Some(_) => {
            return Err(ApiError::bad(
                Some("stream_options"),
                "`stream_options` must be an object",
            ));
        }
    };
    let sampling = SamplingParams {
        temperature,
        top_k,
        top_p,
        min_p,
    };
    sampling.validate().map_err(|e| ApiError::bad(None, e))?;
    Ok(Ask {
        params: GenerateParams {
            sampling,
            seed,
            max_tokens,
            stop_token_ids: vec![m.tok.eos_id],
            ignore_eos,
            priority: params::priority(o)?,
            draft,
            logprobs,
        },
        stops: params::stop(o)?,
        stream,
        include_usage,
    })
}

/// How a generation ended.
pub struct Final {
    pub reason: &'static str,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub cached_tokens: usize,
    pub token_sha: String,
    pub error: Option<String>,
    /// Logprob entries not yet sent (all of them when the reply is not streamed).
    pub logprobs: Vec<Entry>,
}

impl Final {
    pub fn usage(&self) -> serde_json::Value {
        serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        })
    }

    pub fn extension(&self) -> serde_json::Value {
        serde_json::json!({
            "token_sha": self.token_sha, "cached_tokens": self.cached_tokens, "drafted": 0, "accepted": 0,
        })
    }
}

/// A piece of the output, with the logprob entries of the tokens it completes.
pub enum Piece {
    Text(String, Vec<Entry>),
    Done(String, Final),
}

/// Cancels the engine request when dropped before it finished (a client that went away).
struct Guard {
    st: Arc<AppState>,
    id: RequestId,
    done: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.st.active.fetch_sub(1, Ordering::AcqRel);
        if !self.done {
            if let Ok(m) = self.st.model() {
                m.engine.cancel(self.id);
            }
            self.st.metrics.outcome("abort");
        }
    }
}

/// A submitted request's events, turned into text.
pub struct Run {
    guard: Guard,
    rx: UnboundedReceiver<Event>,
    text: TextStream,
    stop: StopMatcher,
    eos: Option<u32>,
    start: Instant,
    last: Option<Instant>,
    ids: Vec<u32>,
    stopped: bool,
    logprobs: Vec<Entry>,
}

/// Submits `prompt`; 429 when the queue is full, 400 when it can never run.
pub async fn submit(st: &Arc<AppState>, prompt: Vec<u32>, ask: &Ask) -> Result<Run, ApiError> {
    let m = st.model()?;
    let limit = st.cfg.parallel + st.cfg.max_queue;
    if st.active.fetch_add(1, Ordering::AcqRel) >= limit {
        st.active.fetch_sub(1, Ordering::AcqRel);
        st.metrics.outcome("rejected");
        return Err(ApiError::busy());
    }
    let (tx, rx) = unbounded_channel();
    let sink = Box::new(move |ev| {
        let _ = tx.send(ev);
    });
    let engine = m.engine.clone();
    let n = prompt.len();
    let params = ask.params.clone();
    let res = tokio::task::spawn_blocking(move || engine.submit(prompt, params, sink))
        .await
        .map_err(|e| ApiError::internal(e.to_string()));
    let id = match res {
        Ok(Ok(id)) => id,
        Ok(Err(e)) | Err(ApiError { message: e, .. }) => {
            st.active.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::bad(None, e));
        }
    };
    st.metrics.prompt_tokens.inc_by(n as u64);
    Ok(Run {
        guard: Guard {
            st: st.clone(),
            id,
            done: false,
        },
        rx,
        text: TextStream::default(),
        stop: StopMatcher::new(ask.stops.clone()),
        eos: (!ask.params.ignore_eos).then_some(m.tok.eos_id),
        start: Instant::now(),
        last: None,
        ids: Vec::new(),
        stopped: false,
        logprobs: Vec::new(),
    })
}

impl Run {
    /// The next piece of text, or the end with whatever text was held back.
    pub async fn next(&mut self) -> Piece {
        let st = self.guard.st.clone();
        loop {
            let Some(ev) = self.rx.recv().await else {
                return self.end("abort", 0, String::new(), Some("the engine stopped".into()));
            };
            match ev {
                Event::Token { .. } if self.stopped => {}
                Event::Token { id, logprobs, .. } => {
                    let now = Instant::now();
                    match self.last {
                        None => st.metrics.ttft.observe((now - self.start).as_secs_f64()),
                        Some(t) => st.metrics.itl.observe((now - t).as_secs_f64()),
                    }
                    self.last = Some(now);
                    self.ids.push(id);
                    st.metrics.generation_tokens.inc();
                    if Some(id) == self.eos {
                        continue;
                    }
                    let m = st.model().expect("loaded");
                    if let Some(lp) = logprobs {
                        self.logprobs.push(Entry::new(&m.tok, id, &lp));
                    }
                    let delta = self.text.push(&m.tok, id).unwrap_or_default();
                    let (out, hit) = self.stop.push(&delta);
                    if hit {
                        self.stopped = true;
                        m.engine.cancel(self.guard.id);
                    }
                    if !out.is_empty() {
                        return Piece::Text(out, std::mem::take(&mut self.logprobs));
                    }
                }
                Event::Finished {
                    reason,
                    usage,
                    token_sha: sha,
                } => {
                    let reason = if self.stopped { "stop" } else { reason.as_str() };
                    let tail = self.stop.flush();
                    let mut p = self.end(reason, usage.cached_tokens, tail, None);
                    if let Piece::Done(_, f) = &mut p {
                        f.prompt_tokens = usage.prompt_tokens;
                        // A stop string ends the output at the token that completed it, whatever the engine ran on.
                        f.token_sha = if self.stopped { token_sha(&self.ids) } else { sha };
                    }
                    return p;
                }
                Event::Error(e) => return self.end("error", 0, String::new(), Some(e)),
            }
        }
    }

    fn end(&mut self, reason: &'static str, cached: usize, tail: String, error: Option<String>) -> Piece {
        self.guard.done = true;
        if self.guard.st.cfg.log {
            crate::log(&format!(
                "request {} {reason}: {} tokens in {:.2} s{}",
                self.guard.id.0,
                self.ids.len(),
                self.start.elapsed().as_secs_f64(),
                error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
            ));
        }
        self.guard
            .st
            .metrics
            .outcome(if error.is_some() { "error" } else { reason });
        Piece::Done(
            tail,
            Final {
                reason,
                prompt_tokens: 0,
                completion_tokens: self.ids.len(),
                cached_tokens: cached,
                token_sha: String::new(),
                error,
                logprobs: std::mem::take(&mut self.logprobs),
            },
        )
    }

    /// Runs to the end, collecting the text.
    pub async fn collect(mut self) -> (String, Final) {
        let mut text = String::new();
        let mut entries = Vec::new();
        loop {
            match self.next().await {
                Piece::Text(t, lp) => {
                    text.push_str(&t);
                    entries.extend(lp);
                }
                Piece::Done(t, mut f) => {
                    text.push_str(&t);
                    entries.append(&mut f.logprobs);
                    f.logprobs = entries;
                    return (text, f);
                }
            }
        }
    }
}
