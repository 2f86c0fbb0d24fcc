//! The HTTP routes: health, models, completions, chat completions, tokenize, detokenize and metrics.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::generate::{self, Final, Piece, Run};
use crate::logprobs::{self, Entry};
use crate::params::{self, Obj, Prompt};
use crate::state::{AppState, unix_now};

type Shared = Arc<AppState>;

/// All routes over the shared state.
pub fn router(st: Shared) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/metrics", get(metrics))
        .with_state(st)
}

fn authorize(st: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let h = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if st.keys.allows(h) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

async fn health(State(st): State<Shared>) -> Response {
    match st.model() {
        Ok(m) if m.engine.stats().ranks_down => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "down", "reason": "a rank of --tp stopped; requests fail until the server restarts"}),
            ),
        )
            .into_response(),
        Ok(_) => (StatusCode::OK, Json(json!({"status": "ok"}))).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn models(State(st): State<Shared>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    authorize(&st, &headers)?;
    let m = st.model()?;
    Ok(Json(json!({"object": "list", "data": [{
        "id": st.cfg.name, "object": "model", "created": st.created, "owned_by": "tensorfold",
        "max_model_len": m.context,
    }]})))
}

async fn metrics(State(st): State<Shared>) -> Response {
    let stats = st.model().map(|m| m.engine.stats()).unwrap_or_default();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        st.metrics.render(&stats),
    )
        .into_response()
}

fn encode_text(st: &AppState, text: &str, bos: bool) -> Result<Vec<u32>, ApiError> {
    let m = st.model()?;
    let mut ids = if bos { vec![m.tok.bos_id] } else { Vec::new() };
    ids.extend(m.tok.encode(text).map_err(|e| ApiError::bad(None, e))?);
    Ok(ids)
}

fn chat_prompt(st: &AppState, o: &Obj) -> Result<Vec<u32>, ApiError> {
    let msgs = params::messages(o)?;
    let add = params::boolean(o, "add_generation_prompt")?.unwrap_or(true);
    let text = st
        .model()?
        .chat
        .render(&msgs, add)
        .map_err(|e| ApiError::bad(Some("messages"), e))?;
    encode_text(st, &text, false)
}

/// Counts a request refused before it ran (400) as `invalid`.
fn counted<T>(st: &AppState, r: Result<T, ApiError>) -> Result<T, ApiError> {
    if let Err(e) = &r
        && e.status == StatusCode::BAD_REQUEST
    {
        st.metrics.outcome("invalid");
    }
    r
}

async fn completions(State(st): State<Shared>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    authorize(&st, &headers)?;
    let r = completion_reply(&st, &body).await;
    counted(&st, r)
}

async fn completion_reply(st: &Shared, body: &Bytes) -> Result<Response, ApiError> {
    let o = params::object(body)?;
    st.model()?;
    let prompt = match params::prompt(&o)? {
        Prompt::Text(t) => encode_text(st, &t, true)?,
        Prompt::Ids(ids) => ids,
    };
    respond(st.clone(), o, prompt, false).await
}

async fn chat(State(st): State<Shared>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    authorize(&st, &headers)?;
    let r = chat_reply(&st, &body).await;
    counted(&st, r)
}

async fn chat_reply(st: &Shared, body: &Bytes) -> Result<Response, ApiError> {
    let o = params::object(body)?;
    st.model()?;
    let prompt = chat_prompt(st, &o)?;
    respond(st.clone(), o, prompt, true).await
}

async fn respond(st: Shared, o: Obj, prompt: Vec<u32>, chat: bool) -> Result<Response, ApiError> {
    let ask = generate::ask(&st, &o, prompt.len(), chat)?;
    let run = generate::submit(&st, prompt, &ask).await?;
    let id = if chat {
        format!("chatcmpl-{}", st.next_id())
    } else {
        format!("cmpl-{}", st.next_id())
    };
    let head = Head {
        id,
        created: unix_now(),
        model: st.cfg.name.clone(),
        chat,
        logprobs: ask.params.logprobs.is_some(),
    };
    if ask.stream {
        return Ok(stream(head, run, ask.include_usage).into_response());
    }
    let (text, fin) = run.collect().await;
    if let Some(e) = &fin.error {
        return Err(ApiError::internal(e.clone()));
    }
    let lp = head.logprobs_json(&fin.logprobs, 0);
    let choice = if chat {
        json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": lp, "finish_reason": fin.reason})
    } else {
        json!({"index": 0, "text": text, "logprobs": lp, "finish_reason": fin.reason})
    };
    Ok(Json(json!({
        "id": head.id, "object": head.object(false), "created": head.created, "model": head.model,
        "choices": [choice], "usage": fin.usage(), "tensorfold": fin.extension(),
    }))
    .into_response())
}

struct Head {
    id: String,
    created: u64,
    model: String,
    chat: bool,
    logprobs: bool,
}

impl Head {
    /// The `logprobs` of a choice: null unless asked for; completion offsets start at `offset` characters.
    fn logprobs_json(&self, entries: &[Entry], offset: usize) -> Value {
        match (self.logprobs, self.chat) {
            (false, _) => Value::Null,
            (true, true) => logprobs::chat(entries),
            (true, false) => logprobs::completion(entries, offset),
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.chat, chunk) {
            (true, true) => "chat.completion.chunk",
            (true, false) => "chat.completion",
            (false, _) => "text_completion",
        }
    }

    /// One chunk carrying `text` (or a role opener / a finish reason).
    fn chunk(&self, text: Option<&str>, role: bool, finish: Option<&str>) -> Value {
        let choice = if self.chat {
            let mut delta = json!({});
            if role {
                delta["role"] = json!("assistant");
            }
            if let Some(t) = text {
                delta["content"] = json!(t);
            }
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish})
        };
        json!({"id": self.id, "object": self.object(true), "created": self.created, "model": self.model, "choices": [choice]})
    }

    /// A chunk with `text` and the logprobs of the tokens that completed it.
    fn text_chunk(&self, text: &str, entries: &[Entry], offset: usize) -> Value {
        let mut c = self.chunk(Some(text), false, None);
        c["choices"][0]["logprobs"] = self.logprobs_json(entries, offset);
        c
    }

    /// The closing chunks: the finish reason, then usage when asked; `tensorfold` rides on the last.
    fn closing(&self, tail: &str, fin: &Final, include_usage: bool, offset: usize) -> Vec<Value> {
        let mut out = Vec::new();
        let text = (!tail.is_empty()).then_some(tail);
        if let Some(e) = &fin.error {
            out.push(json!({"error": {"message": e, "type": "server_error", "param": null, "code": null}}));
            return out;
        }
        let mut last = self.chunk(text, false, Some(fin.reason));
        if !fin.logprobs.is_empty() {
            last["choices"][0]["logprobs"] = self.logprobs_json(&fin.logprobs, offset);
        }
        out.push(last);
        if include_usage {
            out.push(
                json!({"id": self.id, "object": self.object(true), "created": self.created,
                "model": self.model, "choices": [], "usage": fin.usage()}),
            );
        }
        if let Some(last) = out.last_mut() {
            last["tensorfold"] = fin.extension();
        }
        out
    }
}

/// The SSE reply; a client that goes away drops the run, which cancels the engine request.
fn stream(head: Head, mut run: Run, include_usage: bool) -> impl IntoResponse {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(64);
    let ev = |v: Value| Ok(SseEvent::default().data(v.to_string()));
    tokio::spawn(async move {
        if head.chat && tx.send(ev(head.chunk(Some(""), true, None))).await.is_err() {
            return;
        }
        let mut sent = 0;
        loop {
            let piece = tokio::select! {
                p = run.next() => p,
                _ = tx.closed() => return,
            };
            match piece {
                Piece::Text(t, lp) => {
                    if tx.send(ev(head.text_chunk(&t, &lp, sent))).await.is_err() {
                        return;
                    }
                    sent += logprobs::chars(&lp);
                }
                Piece::Done(tail, fin) => {
                    for c in head.closing(&tail, &fin, include_usage, sent) {
                        if tx.send(ev(c)).await.is_err() {
                            return;
                        }
                    }
                    let _ = tx.send(Ok(SseEvent::default().data("[DONE]"))).await;
                    return;
                }
            }
        }
    });
    let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Sse::new(body).keep_alive(KeepAlive::default())
}

async fn tokenize(State(st): State<Shared>, headers: HeaderMap, body: Bytes) -> Result<Json<Value>, ApiError> {
    authorize(&st, &headers)?;
    let o = params::object(&body)?;
    let m = st.model()?;
    generate::check_model(&st, &o)?;
    let special = params::boolean(&o, "add_special_tokens")?;
    let ids = if o.contains_key("messages") {
        chat_prompt(&st, &o)?
    } else {
        let text = params::string(&o, "prompt")?
            .ok_or_else(|| ApiError::bad(Some("prompt"), "`prompt` (a string) or `messages` is required"))?;
        encode_text(&st, text, special.unwrap_or(true))?
    };
    let strs = if params::boolean(&o, "return_token_strs")?.unwrap_or(false) {
        let s: Vec<String> = ids.iter().map(|&i| m.tok.decode(&[i]).unwrap_or_default()).collect();
        json!(s)
    } else {
        Value::Null
    };
    Ok(Json(
        json!({"count": ids.len(), "max_model_len": m.context, "tokens": ids, "token_strs": strs}),
    ))
}

async fn detokenize(State(st): State<Shared>, headers: HeaderMap, body: Bytes) -> Result<Json<Value>, ApiError> {
    authorize(&st, &headers)?;
    let o = params::object(&body)?;
    let m = st.model()?;
    let ids = params::token_ids(o.get("tokens").unwrap_or(&Value::Null), "tokens")?;
    let vocab = m.engine.vocab_size();
    if let Some(t) = ids.iter().find(|&&t| t as usize >= vocab) {
        return Err(ApiError::bad(
            Some("tokens"),
            format!("token id {t} is outside the vocabulary (0..{vocab})"),
        ));
    }
    let text = m.tok.decode(&ids).map_err(|e| ApiError::bad(Some("tokens"), e))?;
    Ok(Json(json!({"prompt": text})))
}
