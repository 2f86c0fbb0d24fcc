//! The server through HTTP with a Rust client: routes streamed and not, errors, stop strings, usage, parallel bits.

mod common;

use std::sync::OnceLock;

use common::{Server, chunk_texts, config, post, start, stream};
use serde_json::{Value, json};
use tensorfold_server::auth::Keys;

fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| start(config("tiny"), Keys::open(), true))
}

fn native() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| start(config("tiny-native"), Keys::open(), false))
}

fn completion(prompt: &str, n: usize) -> Value {
    json!({"model": "tiny", "prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": true})
}

#[tokio::test]
async fn health_and_models() {
    let s = server();
    let r = reqwest::get(s.url("/health")).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = reqwest::get(s.url("/v1/models")).await.unwrap().json().await.unwrap();
    assert_eq!(v["data"][0]["id"], "tiny");
    assert_eq!(v["object"], "list");
}

#[tokio::test]
async fn completion_plain_and_streamed_agree() {
    let s = server();
    let body = completion("The quick brown fox", 8);
    let (code, v) = post(&s.url("/v1/completions"), &body).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 8);
    let (_, t) = post(&s.url("/tokenize"), &json!({"prompt": "The quick brown fox"})).await;
    assert_eq!(v["usage"]["prompt_tokens"], t["count"]);
    assert_eq!(v["usage"]["total_tokens"], t["count"].as_u64().unwrap() + 8);
    let sha = v["tensorfold"]["token_sha"].as_str().unwrap().to_string();
    assert!(!sha.is_empty());
    assert_eq!(v["tensorfold"]["drafted"], 0);
    let mut sb = body.clone();
    sb["stream"] = json!(true);
    sb["stream_options"] = json!({"include_usage": true});
    let (chunks, done) = stream(&s.url("/v1/completions"), &sb).await;
    assert!(done);
    assert_eq!(chunk_texts(&chunks).concat(), v["choices"][0]["text"].as_str().unwrap());
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"], v["usage"]);
    assert_eq!(last["tensorfold"]["token_sha"], sha.as_str());
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn completion_from_token_ids() {
    let s = server();
    let (_, t) = post(&s.url("/tokenize"), &json!({"prompt": "Hello there"})).await;
    let ids = t["tokens"].clone();
    let (code, a) = post(
        &s.url("/v1/completions"),
        &json!({"prompt": ids, "max_tokens": 4, "temperature": 0, "ignore_eos": true}),
    )
    .await;
    assert_eq!(code, 200, "{a}");
    let (_, b) = post(&s.url("/v1/completions"), &completion("Hello there", 4)).await;
    assert_eq!(a["tensorfold"]["token_sha"], b["tensorfold"]["token_sha"]);
    assert_eq!(a["choices"][0]["text"], b["choices"][0]["text"]);
}

async fn chat_round(s: &Server, model: &str) {
    let body = json!({"model": model, "max_tokens": 6, "temperature": 0, "ignore_eos": true, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"}, {"role": "developer", "content": [{"type": "text", "text": "x"}]},
        {"role": "user", "content": "More?"}]});
    let (code, v) = post(&s.url("/v1/chat/completions"), &body).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["usage"]["completion_tokens"], 6);
    let mut sb = body.clone();
    sb["stream"] = json!(true);
    let (chunks, done) = stream(&s.url("/v1/chat/completions"), &sb).await;
    assert!(done);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(
        chunk_texts(&chunks).concat(),
        v["choices"][0]["message"]["content"].as_str().unwrap()
    );
    let last = chunks.last().unwrap();
    assert_eq!(last["object"], "chat.completion.chunk");
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(last["tensorfold"]["token_sha"], v["tensorfold"]["token_sha"]);
}

#[tokio::test]
async fn chat_with_the_checkpoint_template() {
    chat_round(server(), "tiny").await;
}

#[tokio::test]
async fn chat_in_the_native_format() {
    let s = native();
    chat_round(s, "tiny-native").await;
    // Without a template the native rendering is used; it matches the template path token for token here.
    let msgs = json!([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]);
    let (_, a) = post(&s.url("/tokenize"), &json!({"messages": msgs})).await;
    let (_, b) = post(&server().url("/tokenize"), &json!({"messages": msgs})).await;
    assert_eq!(a["tokens"], b["tokens"]);
    assert!(a["count"].as_u64().unwrap() > 2);
}

#[tokio::test]
async fn tokenize_and_detokenize() {
    let s = server();
    let (code, t) = post(
        &s.url("/tokenize"),
        &json!({"prompt": "Hello world", "add_special_tokens": false, "return_token_strs": true}),
    )
    .await;
    assert_eq!(code, 200, "{t}");
    assert_eq!(t["count"], t["tokens"].as_array().unwrap().len());
    assert_eq!(t["max_model_len"], 512);
    assert_eq!(
        t["token_strs"].as_array().unwrap().len(),
        t["tokens"].as_array().unwrap().len()
    );
    let (code, d) = post(&s.url("/detokenize"), &json!({"tokens": t["tokens"]})).await;
    assert_eq!(code, 200);
    assert_eq!(d["prompt"], "Hello world");
    let (code, e) = post(&s.url("/detokenize"), &json!({"tokens": [999999999]})).await;
    assert_eq!(code, 400, "{e}");
}

#[tokio::test]
async fn bad_requests_are_400_before_any_stream() {
    let s = server();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": true}),
            "max_tokens",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": "5"}),
            "max_tokens",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": -1}),
            "max_tokens",
        ),
        ("/v1/completions", json!({"prompt": "x", "max_tokens": 0}), "max_tokens"),
        (
            "/v1/completions",
            json!({"prompt": "x", "temperature": true}),
            "temperature",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "temperature": -0.5}),
            "temperature",
        ),
        ("/v1/completions", json!({"prompt": "x", "top_p": 1.5}), "top_p"),
        ("/v1/completions", json!({"prompt": "x", "top_k": -3}), "top_k"),
        ("/v1/completions", json!({"prompt": "x", "min_p": 2}), "min_p"),
        ("/v1/completions", json!({"prompt": "x", "seed": 1.5}), "seed"),
        ("/v1/completions", json!({"prompt": "x", "model": "nope"}), "model"),
        ("/v1/completions", json!({"prompt": "x", "n": 2}), "n"),
        ("/v1/completions", json!({"prompt": "x", "stop": 5}), "stop"),
        ("/v1/completions", json!({"prompt": 5}), "prompt"),
        ("/v1/completions", json!({}), "prompt"),
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 100000}),
            "max_tokens",
        ),
        ("/v1/chat/completions", json!({"messages": []}), "messages"),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "tool", "content": "x"}]}),
            "messages",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": 3}]}),
            "messages",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x"}], "ignore_eos": 1}),
            "ignore_eos",
        ),
    ];
    for (path, mut body, param) in cases {
        body["stream"] = json!(true);
        let (code, v) = post(&s.url(path), &body).await;
        assert_eq!(code, 400, "{path} {body}: {v}");
        assert_eq!(v["error"]["param"], param, "{body}: {v}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    let long = "word ".repeat(600);
    let (code, v) = post(&s.url("/v1/completions"), &json!({"prompt": long, "stream": true})).await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["param"], "prompt");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 511 prompt tokens fit"),
        "{v}"
    );
    let (_, v) = post(&s.url("/v1/completions"), &json!({"prompt": "x", "max_tokens": 100000})).await;
    assert!(
        v["error"]["message"].as_str().unwrap().contains("lower max_tokens to"),
        "{v}"
    );
    let c = reqwest::Client::new();
    for raw in [
        "{not json",
        "{\"prompt\": \"x\", \"temperature\": NaN}",
        "{\"prompt\": \"x\", \"temperature\": 1e999}",
        "[1]",
    ] {
        let r = c
            .post(s.url("/v1/completions"))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{raw}");
        let v: Value = r.json().await.unwrap();
        assert!(v["error"]["message"].is_string(), "{raw}: {v}");
    }
}

#[tokio::test]
async fn stop_strings_span_chunks_and_are_omitted() {
    let s = server();
    let mut body = completion("Once upon a time", 24);
    body["stream"] = json!(true);
    let (chunks, _) = stream(&s.url("/v1/completions"), &body).await;
    let texts: Vec<String> = chunk_texts(&chunks).into_iter().filter(|t| !t.is_empty()).collect();
    let full = texts.concat();
    // A stop string made of the end of one chunk and the start of the next.
    let i = (0..texts.len() - 1)
        .find(|&i| texts[i].chars().count() >= 1 && texts[i + 1].chars().count() >= 1)
        .unwrap();
    let a: String = texts[i]
        .chars()
        .rev()
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let b: String = texts[i + 1].chars().take(2).collect();
    let stop = format!("{a}{b}");
    let expected = &full[..full.find(&stop).unwrap()];
    for streamed in [false, true] {
        let mut sb = completion("Once upon a time", 24);
        sb["stop"] = json!(["never-appears-here", stop]);
        if streamed {
            sb["stream"] = json!(true);
            let (chunks, done) = stream(&s.url("/v1/completions"), &sb).await;
            assert!(done);
            assert_eq!(chunk_texts(&chunks).concat(), expected, "stop {stop:?}");
            assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
        } else {
            let (code, v) = post(&s.url("/v1/completions"), &sb).await;
            assert_eq!(code, 200);
            assert_eq!(v["choices"][0]["text"], expected, "stop {stop:?}");
            assert_eq!(v["choices"][0]["finish_reason"], "stop");
            let n = v["usage"]["completion_tokens"].as_u64().unwrap();
            assert!(n < 24);
            // token_sha covers exactly the tokens up to the one completing the stop string.
            let mut head = completion("Once upon a time", n as usize);
            head["max_tokens"] = json!(n);
            let (_, h) = post(&s.url("/v1/completions"), &head).await;
            assert_eq!(v["tensorfold"]["token_sha"], h["tensorfold"]["token_sha"]);
        }
    }
}

#[tokio::test]
async fn parallel_streams_match_each_alone() {
    let s = server();
    let bodies: Vec<Value> = (0..32)
        .map(|i| {
            json!({"prompt": format!("Request number {i} says"), "max_tokens": 4, "temperature": 1.0,
            "seed": i, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}})
        })
        .collect();
    let mut alone = Vec::new();
    for b in &bodies {
        let (c, _) = stream(&s.url("/v1/completions"), b).await;
        alone.push(c.last().unwrap()["tensorfold"]["token_sha"].clone());
    }
    let url = s.url("/v1/completions");
    let tasks: Vec<_> = bodies
        .iter()
        .cloned()
        .map(|b| {
            let url = url.clone();
            tokio::spawn(async move { stream(&url, &b).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let (c, done) = t.await.unwrap();
        assert!(done);
        assert_eq!(c.last().unwrap()["tensorfold"]["token_sha"], alone[i], "request {i}");
    }
}

#[tokio::test]
async fn metrics_after_traffic() {
    let s = server();
    let (code, _) = post(&s.url("/v1/completions"), &completion("metrics", 3)).await;
    assert_eq!(code, 200);
    let (code, _) = post(&s.url("/v1/completions"), &json!({"prompt": "x", "n": 3})).await;
    assert_eq!(code, 400);
    let text = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
    for name in [
        "tensorfold_requests_total{outcome=\"length\"}",
        "tensorfold_requests_total{outcome=\"invalid\"}",
        "tensorfold_prompt_tokens_total",
        "tensorfold_generation_tokens_total",
        "tensorfold_time_to_first_token_seconds_bucket",
        "tensorfold_inter_token_latency_seconds_count",
        "tensorfold_kv_cache_usage_ratio",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:gpu_cache_usage_perc",
        "vllm:kv_cache_usage_perc",
    ] {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }
}

#[tokio::test]
async fn background_priority_and_serial_reference_give_the_same_bits() {
    let s = server();
    let base = json!({"prompt": "Same bits", "max_tokens": 5, "temperature": 0.8, "seed": 3, "ignore_eos": true});
    let (_, a) = post(&s.url("/v1/completions"), &base).await;
    let mut b = base.clone();
    b["priority"] = json!("background");
    b["draft"] = json!(false);
    b["max_completion_tokens"] = json!(5);
    let (code, bv) = post(&s.url("/v1/completions"), &b).await;
    assert_eq!(code, 200, "{bv}");
    assert_eq!(a["tensorfold"]["token_sha"], bv["tensorfold"]["token_sha"]);
    assert_eq!(a["choices"][0]["text"], bv["choices"][0]["text"]);
}

/// The chosen tokens' bytes of a chat or completion `logprobs` object, and the entries' logprobs.
fn logprob_columns(lp: &Value, chat: bool) -> (Vec<u8>, Vec<f64>) {
    if chat {
        let content = lp["content"].as_array().expect("content");
        let bytes = content
            .iter()
            .flat_map(|e| e["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8))
            .collect();
        (bytes, content.iter().map(|e| e["logprob"].as_f64().unwrap()).collect())
    } else {
        let text: String = lp["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let lps = lp["token_logprobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        (text.into_bytes(), lps)
    }
}

#[tokio::test]
async fn logprobs_streamed_and_not_agree_and_spell_the_text() {
    let s = server();
    for chat in [false, true] {
        let (route, mut body) = if chat {
            let b = json!({"messages": [{"role": "user", "content": "Name a colour"}], "max_tokens": 6,
                "temperature": 0, "ignore_eos": true, "logprobs": true, "top_logprobs": 3});
            ("/v1/chat/completions", b)
        } else {
            let mut b = completion("Once upon a time", 6);
            b["logprobs"] = json!(3);
            ("/v1/completions", b)
        };
        let (code, v) = post(&s.url(route), &body).await;
        assert_eq!(code, 200, "{v}");
        let lp = &v["choices"][0]["logprobs"];
        let (bytes, lps) = logprob_columns(lp, chat);
        assert_eq!(lps.len(), 6, "{lp}");
        assert!(lps.iter().all(|&x| x <= 0.0));
        let text = if chat {
            v["choices"][0]["message"]["content"].as_str().unwrap()
        } else {
            v["choices"][0]["text"].as_str().unwrap()
        };
        assert!(
            bytes.starts_with(text.trim_end_matches('\u{FFFD}').as_bytes()),
            "{text:?}"
        );
        if chat {
            for e in lp["content"].as_array().unwrap() {
                let top = e["top_logprobs"].as_array().unwrap();
                assert_eq!(top.len(), 3);
                assert_eq!(top[0]["logprob"], e["logprob"], "greedy picks the most likely token");
                assert!(top[1]["logprob"].as_f64() <= top[0]["logprob"].as_f64());
            }
        } else {
            let offsets: Vec<u64> = lp["text_offset"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(offsets[0], 0);
            assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
            assert!(
                lp["top_logprobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|m| !m.as_object().unwrap().is_empty())
            );
        }
        body["stream"] = json!(true);
        let (chunks, done) = stream(&s.url(route), &body).await;
        assert!(done);
        let mut joined = Vec::new();
        let mut offsets = Vec::new();
        for c in &chunks {
            let l = &c["choices"][0]["logprobs"];
            if l.is_null() {
                continue;
            }
            if chat {
                joined.extend(l["content"].as_array().unwrap().iter().cloned());
            } else {
                joined.extend(l["tokens"].as_array().unwrap().iter().cloned());
                offsets.extend(l["text_offset"].as_array().unwrap().iter().cloned());
            }
        }
        if chat {
            assert_eq!(Value::Array(joined), lp["content"]);
        } else {
            assert_eq!(Value::Array(joined), lp["tokens"]);
            assert_eq!(Value::Array(offsets), lp["text_offset"]);
        }
    }
    let plain = post(&s.url("/v1/completions"), &completion("Once upon a time", 2))
        .await
        .1;
    assert_eq!(plain["choices"][0]["logprobs"], Value::Null);
    let bad = json!({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2});
    let (code, v) = post(&s.url("/v1/chat/completions"), &bad).await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["param"], "top_logprobs");
}
