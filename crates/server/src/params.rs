//! Request fields read strictly from JSON: wrong types, booleans for numbers and out-of-range values are 400s.

use serde_json::{Map, Value};
use tensorfold_engine::Priority;

use crate::chat::Message;
use crate::error::ApiError;

pub type Obj = Map<String, Value>;

/// Parses a body as a JSON object.
pub fn object(body: &[u8]) -> Result<Obj, ApiError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad(None, format!("the body is not valid JSON: {e}")))?;
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(ApiError::bad(None, "the body must be a JSON object")),
    }
}

fn present<'a>(o: &'a Obj, k: &str) -> Option<&'a Value> {
    o.get(k).filter(|v| !v.is_null())
}

/// A non-negative integer field.
pub fn uint(o: &Obj, k: &str) -> Result<Option<u64>, ApiError> {
    let Some(v) = present(o, k) else { return Ok(None) };
    match v {
        Value::Number(n) => match n.as_u64() {
            Some(x) => Ok(Some(x)),
            None => match n.as_f64() {
                Some(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 9.0e15 => Ok(Some(f as u64)),
                _ => Err(ApiError::bad(
                    Some(k),
                    format!("`{k}` must be a non-negative integer, got {n}"),
                )),
            },
        },
        _ => Err(ApiError::bad(
            Some(k),
            format!("`{k}` must be an integer, got {}", kind(v)),
        )),
    }
}

/// A finite number field.
pub fn num(o: &Obj, k: &str) -> Result<Option<f64>, ApiError> {
    let Some(v) = present(o, k) else { return Ok(None) };
    match v.as_f64() {
        Some(f) if v.is_number() && f.is_finite() => Ok(Some(f)),
        Some(_) => Err(ApiError::bad(Some(k), format!("`{k}` must be a finite number"))),
        None => Err(ApiError::bad(
            Some(k),
            format!("`{k}` must be a number, got {}", kind(v)),
        )),
    }
}

/// A number within `[lo, hi]`.
pub fn ranged(o: &Obj, k: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
    match num(o, k)? {
        Some(x) if !(lo..=hi).contains(&x) => Err(ApiError::bad(
            Some(k),
            format!("`{k}` must be between {lo} and {hi}, got {x}"),
        )),
        x => Ok(x),
    }
}

pub fn boolean(o: &Obj, k: &str) -> Result<Option<bool>, ApiError> {
    let Some(v) = present(o, k) else { return Ok(None) };
    v.as_bool()
        .map(Some)
        .ok_or_else(|| ApiError::bad(Some(k), format!("`{k}` must be a boolean, got {}", kind(v))))
}

pub fn string<'a>(o: &'a Obj, k: &str) -> Result<Option<&'a str>, ApiError> {
    let Some(v) = present(o, k) else { return Ok(None) };
    v.as_str()
        .map(Some)
        .ok_or_else(|| ApiError::bad(Some(k), format!("`{k}` must be a string, got {}", kind(v))))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `stop`: a string or a list of up to 16 non-empty strings.
pub fn stop(o: &Obj) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::bad(Some("stop"), "`stop` must be a string or a list of non-empty strings");
    let list = match present(o, "stop") {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(bad()),
    };
    if list.iter().any(String::is_empty) {
        return Err(bad());
    }
    if list.len() > 16 {
        return Err(ApiError::bad(Some("stop"), "`stop` takes at most 16 strings"));
    }
    Ok(list)
}

/// A token-id list.
pub fn token_ids(v: &Value, k: &str) -> Result<Vec<u32>, ApiError> {
    let bad = || ApiError::bad(Some(k), format!("`{k}` must be a list of token ids (integers >= 0)"));
    let a = v.as_array().ok_or_else(bad)?;
    a.iter()
        .map(|t| {
            t.as_u64()
                .filter(|&x| x <= u32::MAX as u64)
                .map(|x| x as u32)
                .ok_or_else(bad)
        })
        .collect()
}

/// The completion prompt: text, or token ids (a list of one of either is accepted too).
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

pub fn prompt(o: &Obj) -> Result<Prompt, ApiError> {
    let bad = || {
        ApiError::bad(
            Some("prompt"),
            "`prompt` must be a string, a list of token ids, or a list holding one of either",
        )
    };
    match present(o, "prompt") {
        None => Err(ApiError::bad(Some("prompt"), "`prompt` is required")),
        Some(Value::String(s)) => Ok(Prompt::Text(s.clone())),
        Some(Value::Array(a)) if a.iter().all(Value::is_number) && !a.is_empty() => {
            Ok(Prompt::Ids(token_ids(&Value::Array(a.clone()), "prompt")?))
        }
        Some(Value::Array(a)) if a.len() == 1 => match &a[0] {
            Value::String(s) => Ok(Prompt::Text(s.clone())),
            v @ Value::Array(_) => Ok(Prompt::Ids(token_ids(v, "prompt")?)),
            _ => Err(bad()),
        },
        Some(Value::Array(a)) if a.len() > 1 && a.iter().all(|v| v.is_string() || v.is_array()) => Err(ApiError::bad(
            Some("prompt"),
            "batched prompts are not supported; send one prompt per request",
        )),
        _ => Err(bad()),
    }
}

/// Chat messages: system, developer, user and assistant, with string content or text parts.
pub fn messages(o: &Obj) -> Result<Vec<Message>, ApiError> {
    let bad = |m: String| ApiError::bad(Some("messages"), m);
    let Some(Value::Array(list)) = present(o, "messages") else {
        return Err(bad("`messages` must be a non-empty list of messages".into()));
    };
    if list.is_empty() {
        return Err(bad("`messages` must be a non-empty list of messages".into()));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let Some(m) = m.as_object() else {
            return Err(bad(format!("messages[{i}] must be an object")));
        };
        let role = match m.get("role").and_then(Value::as_str) {
            Some(r @ ("system" | "developer" | "user" | "assistant")) => r.to_string(),
            Some(r) => {
                return Err(bad(format!(
                    "messages[{i}].role `{r}` is not supported (system, developer, user, assistant)"
                )));
            }
            None => return Err(bad(format!("messages[{i}].role must be a string"))),
        };
        let content = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None if role == "assistant" => String::new(),
            Some(Value::Array(parts)) => {
                let mut s = String::new();
                for p in parts {
                    match (
                        p.get("type").and_then(Value::as_str),
                        p.get("text").and_then(Value::as_str),
                    ) {
                        (Some("text"), Some(t)) => s.push_str(t),
                        _ => return Err(bad(format!("messages[{i}].content parts must be text parts"))),
                    }
                }
                s
            }
            _ => {
                return Err(bad(format!(
                    "messages[{i}].content must be a string or a list of text parts"
                )));
            }
        };
        out.push(Message { role, content });
    }
    Ok(out)
}

/// `priority`: `background` (or a positive number) yields to other work.
pub fn priority(o: &Obj) -> Result<Priority, ApiError> {
    match present(o, "priority") {
        None => Ok(Priority::Foreground),
        Some(Value::String(s)) if s == "background" => Ok(Priority::Background),
        Some(Value::String(s)) if s == "foreground" || s == "default" || s == "auto" => Ok(Priority::Foreground),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(if n.as_i64() > Some(0) {
            Priority::Background
        } else {
            Priority::Foreground
        }),
        Some(_) => Err(ApiError::bad(
            Some("priority"),
            "`priority` must be `background`, `foreground` or an integer",
        )),
    }
}
