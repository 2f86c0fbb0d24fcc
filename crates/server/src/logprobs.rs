//! Token log-probabilities in OpenAI's two shapes: chat `content` entries and legacy completion columns.

use serde_json::{Map, Value, json};
use tensorfold_engine::sampler::TokenLogprobs;
use tensorfold_model::tokenizer::Tokenizer;

use crate::error::ApiError;
use crate::params::{self, Obj};

/// What JSON shows for a log-probability of minus infinity (JSON has no infinities).
const FLOOR: f32 = -9999.0;

/// One token's text, bytes and log-probability.
#[derive(Clone, Debug, PartialEq)]
pub struct Alt {
    pub token: String,
    pub bytes: Vec<u8>,
    pub logprob: f32,
}

/// One generated token with its alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub chosen: Alt,
    pub top: Vec<Alt>,
}

impl Entry {
    /// Names the tokens of an engine logprob record.
    pub fn new(tok: &Tokenizer, id: u32, lp: &TokenLogprobs) -> Entry {
        let alt = |id: u32, logprob: f32| Alt {
            token: tok.decode(&[id]).unwrap_or_default(),
            bytes: tok.token_bytes(id),
            logprob: logprob.max(FLOOR),
        };
        Entry {
            chosen: alt(id, lp.logprob),
            top: lp.top.iter().map(|&(t, l)| alt(t, l)).collect(),
        }
    }
}

/// How many alternatives a request asks for per token (`None`: no logprobs); chat and completions spell it differently.
pub fn asked(o: &Obj, chat: bool) -> Result<Option<usize>, ApiError> {
    let max = tensorfold_engine::sampler::MAX_TOP_LOGPROBS as u64;
    let check = |k: &str, n: u64| {
        if n > max {
            Err(ApiError::bad(Some(k), format!("`{k}` must be at most {max}, got {n}")))
        } else {
            Ok(n as usize)
        }
    };
    if !chat {
        return params::uint(o, "logprobs")?.map(|n| check("logprobs", n)).transpose();
    }
    let on = params::boolean(o, "logprobs")?.unwrap_or(false);
    let top = params::uint(o, "top_logprobs")?
        .map(|n| check("top_logprobs", n))
        .transpose()?;
    match (on, top) {
        (false, Some(_)) => Err(ApiError::bad(
            Some("top_logprobs"),
            "`top_logprobs` needs `logprobs: true`",
        )),
        (false, None) => Ok(None),
        (true, top) => Ok(Some(top.unwrap_or(0))),
    }
}

fn alt_json(a: &Alt) -> Value {
    json!({"token": a.token, "logprob": a.logprob, "bytes": a.bytes})
}

/// The chat `logprobs` object for `entries`.
pub fn chat(entries: &[Entry]) -> Value {
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = alt_json(&e.chosen);
            v["top_logprobs"] = Value::Array(e.top.iter().map(alt_json).collect());
            v
        })
        .collect();
    json!({ "content": content })
}

/// The legacy completions `logprobs` object for `entries`, whose text starts `offset` characters into the reply.
pub fn completion(entries: &[Entry], offset: usize) -> Value {
    let mut at = offset;
    let mut offsets = Vec::with_capacity(entries.len());
    for e in entries {
        offsets.push(at);
        at += e.chosen.token.chars().count();
    }
    let top: Vec<Value> = entries
        .iter()
        .map(|e| {
            let m: Map<String, Value> = e.top.iter().map(|a| (a.token.clone(), json!(a.logprob))).collect();
            Value::Object(m)
        })
        .collect();
    json!({
        "tokens": entries.iter().map(|e| e.chosen.token.clone()).collect::<Vec<_>>(),
        "token_logprobs": entries.iter().map(|e| e.chosen.logprob).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": offsets,
    })
}

/// Characters the entries' tokens spell.
pub fn chars(entries: &[Entry]) -> usize {
    entries.iter().map(|e| e.chosen.token.chars().count()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(token: &str, lp: f32) -> Entry {
        let a = Alt {
            token: token.into(),
            bytes: token.as_bytes().to_vec(),
            logprob: lp,
        };
        Entry {
            chosen: a.clone(),
            top: vec![a],
        }
    }

    #[test]
    fn completion_offsets_count_characters_from_the_chunk_start() {
        let v = completion(&[entry("é", -0.5), entry("ab", -1.0)], 3);
        assert_eq!(v["text_offset"], json!([3, 4]));
        assert_eq!(v["tokens"], json!(["é", "ab"]));
        assert_eq!(v["top_logprobs"][1], json!({"ab": -1.0}));
        assert_eq!(chars(&[entry("é", 0.0), entry("ab", 0.0)]), 3);
    }

    #[test]
    fn chat_entries_carry_bytes_and_alternatives() {
        let v = chat(&[entry("hi", -0.25)]);
        assert_eq!(v["content"][0]["bytes"], json!([104, 105]));
        assert_eq!(v["content"][0]["top_logprobs"][0]["logprob"], json!(-0.25));
    }

    #[test]
    fn requests_spell_logprobs_per_route() {
        let o = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(asked(&o(json!({"logprobs": 3})), false).unwrap(), Some(3));
        assert_eq!(
            asked(&o(json!({"logprobs": true, "top_logprobs": 2})), true).unwrap(),
            Some(2)
        );
        assert_eq!(asked(&o(json!({"logprobs": true})), true).unwrap(), Some(0));
        assert_eq!(asked(&o(json!({})), true).unwrap(), None);
        assert!(asked(&o(json!({"top_logprobs": 2})), true).is_err());
        assert!(asked(&o(json!({"logprobs": 21})), false).is_err());
        assert!(asked(&o(json!({"logprobs": true, "top_logprobs": 25})), true).is_err());
        assert!(asked(&o(json!({"logprobs": "yes"})), true).is_err());
        assert!(asked(&o(json!({"logprobs": true})), false).is_err());
    }
}
