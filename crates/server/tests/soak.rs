//! A bounded soak of random valid, invalid and abandoned requests ends idle; /health is 503 before the model loads.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{config, start, stream};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tensorfold_server::auth::Keys;
use tensorfold_server::{AppState, router};

/// A small xorshift so the soak is the same every run.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn request(r: u64) -> (Value, bool) {
    let prompt = format!("soak {} words", r % 97);
    match r % 7 {
        0 => (json!({"prompt": prompt, "max_tokens": "many"}), false),
        1 => (json!({"prompt": prompt, "temperature": -2}), false),
        2 => (json!({"prompt": prompt, "max_tokens": 1_000_000}), false),
        _ => (
            json!({"prompt": prompt, "max_tokens": 1 + r % 6, "temperature": (r % 3) as f64 * 0.5,
                "seed": r % 5, "stop": if r.is_multiple_of(2) { json!("e") } else { json!(null) }}),
            true,
        ),
    }
}

/// Waves of 64 random valid, invalid and abandoned requests for `TENSORFOLD_SOAK_SECS` (10 by default, CI more).
#[tokio::test]
async fn soak_random_requests_then_idle() {
    let s = start(config("tiny"), Keys::open(), true);
    let url = s.url("/v1/completions");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let secs: u64 = std::env::var("TENSORFOLD_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let mut waves = 0;
    while waves == 0 || std::time::Instant::now() < deadline {
        waves += 1;
        let mut tasks = Vec::new();
        for i in 0..64 {
            let r = next(&mut seed);
            let (mut body, valid) = request(r);
            let url = url.clone();
            let streamed = r % 2 == 1;
            let abandon = valid && streamed && i % 5 == 0;
            tasks.push(tokio::spawn(async move {
                if abandon {
                    body["max_tokens"] = json!(60);
                    body["stream"] = json!(true);
                    let resp = reqwest::Client::new().post(&url).json(&body).send().await.unwrap();
                    assert_eq!(resp.status().as_u16(), 200);
                    let mut b = resp.bytes_stream();
                    let _ = b.next().await;
                    return;
                }
                if streamed && valid {
                    body["stream"] = json!(true);
                    let (chunks, done) = stream(&url, &body).await;
                    assert!(done, "{body}");
                    assert!(chunks.last().unwrap()["tensorfold"]["token_sha"].is_string());
                    return;
                }
                let resp = reqwest::Client::new().post(&url).json(&body).send().await.unwrap();
                let code = resp.status().as_u16();
                let v: Value = resp.json().await.unwrap();
                if valid {
                    assert_eq!(code, 200, "{body}: {v}");
                    assert!(v["choices"][0]["finish_reason"].is_string());
                } else {
                    assert_eq!(code, 400, "{body}: {v}");
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    eprintln!("soak: {waves} waves of 64 requests in {secs} s or more");
    let m = s.state.loaded.get().unwrap();
    let mut idle = false;
    for _ in 0..200 {
        let st = m.engine.stats();
        let no_blocks = st.blocks_reserved == 0 && st.blocks_used == 0;
        if st.running == 0 && st.waiting == 0 && no_blocks && s.state.active.load(Ordering::Acquire) == 0 {
            idle = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(idle, "not idle after the soak: {:?}", m.engine.stats());
    let text = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(text.contains("vllm:num_requests_running 0"), "{text}");
    assert!(text.contains("vllm:kv_cache_usage_perc 0.0"), "{text}");
}

#[tokio::test]
async fn health_is_503_while_loading() {
    let st = AppState::new(config("tiny"), Keys::open());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(st)).await });
    let r = reqwest::get(format!("http://{addr}/health")).await.unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/v1/completions"))
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
}
