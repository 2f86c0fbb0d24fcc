//! A DeepSeek V4.1 checkpoint through the same server: completions and chat, concurrent = solo = `"draft": false`, resumed = fresh.

mod common;

use common::{config, post, start_dsv41};
use serde_json::{Value, json};

fn sha(v: &Value) -> String {
    v["tensorfold"]["token_sha"].as_str().expect("token_sha").to_string()
}

#[tokio::test]
async fn dsv41_serves_with_the_exactness_laws() {
    let s = start_dsv41(config("tiny-v41"));
    let url = s.url("/v1/completions");
    let bodies: Vec<Value> = [0.0, 0.7, 1.0, 0.0]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let prompt = format!("Request {i} asks the same thing again and again");
            json!({"model": "tiny-v41", "prompt": prompt, "max_tokens": 10, "temperature": t, "seed": i,
                   "ignore_eos": true})
        })
        .collect();
    let mut solo = Vec::new();
    for b in &bodies {
        let (code, v) = post(&url, b).await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["usage"]["completion_tokens"], 10);
        solo.push(sha(&v));
    }
    let together = futures_util::future::join_all(bodies.iter().map(|b| post(&url, b))).await;
    for (i, (code, v)) in together.iter().enumerate() {
        assert_eq!(*code, 200, "{v}");
        assert_eq!(sha(v), solo[i], "request {i} beside others differs from alone");
    }
    for (i, b) in bodies.iter().enumerate() {
        let mut serial = b.clone();
        serial["draft"] = json!(false);
        let (_, v) = post(&url, &serial).await;
        assert_eq!(sha(&v), solo[i], "request {i} with drafts differs from draft false");
    }

    let long = "Engram looks back at n-grams of the prompt. ".repeat(40);
    let body = json!({"model": "tiny-v41", "prompt": long, "max_tokens": 6, "temperature": 0, "ignore_eos": true});
    let (_, fresh) = post(&url, &body).await;
    let (_, resumed) = post(&url, &body).await;
    let cached = resumed["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64();
    assert!(
        cached.is_some_and(|n| n >= 128),
        "the second request resumed a cached prefix: {resumed}"
    );
    assert_eq!(
        sha(&resumed),
        sha(&fresh),
        "resumed from the cached prefix differs from fresh"
    );

    let chat = json!({"model": "tiny-v41", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4,
                      "temperature": 0});
    let (code, v) = post(&s.url("/v1/chat/completions"), &chat).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["object"], "chat.completion");
}
