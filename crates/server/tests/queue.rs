//! A full queue answers 429 with Retry-After; a client that disconnects is cancelled and its slot freed.

mod common;

use std::time::Duration;

use common::{config, post, start};
use futures_util::StreamExt;
use serde_json::json;
use tensorfold_server::ServerConfig;
use tensorfold_server::auth::Keys;

async fn running(url: &str) -> (f64, f64) {
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    let get = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|x| x.parse().ok())
            .unwrap_or(0.0)
    };
    (
        get("vllm:num_requests_running "),
        get("tensorfold_requests_total{outcome=\"abort\"}"),
    )
}

#[tokio::test]
async fn full_queue_then_disconnect_cancels() {
    let cfg = ServerConfig {
        parallel: 1,
        max_queue: 0,
        context: 4096,
        max_tokens: 4000,
        ..config("tiny")
    };
    let s = start(cfg, Keys::open(), true);
    let long = json!({"prompt": "a long one", "max_tokens": 4000, "ignore_eos": true, "stream": true});
    let r = reqwest::Client::new()
        .post(s.url("/v1/completions"))
        .json(&long)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut body = r.bytes_stream();
    body.next().await.unwrap().unwrap();
    let busy = reqwest::Client::new()
        .post(s.url("/v1/completions"))
        .json(&json!({"prompt": "x", "max_tokens": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status().as_u16(), 429);
    assert_eq!(busy.headers()["retry-after"], "1");
    let st = s.state.loaded.get().unwrap().engine.stats();
    assert_eq!(st.running + st.waiting, 1, "{st:?}");
    drop(body);
    let mut cancelled = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (run, aborted) = running(&s.url("/metrics")).await;
        if run == 0.0 && aborted >= 1.0 && s.state.active.load(std::sync::atomic::Ordering::Acquire) == 0 {
            cancelled = true;
            break;
        }
    }
    assert!(cancelled, "the disconnected request was not cancelled");
    let (code, v) = post(&s.url("/v1/completions"), &json!({"prompt": "x", "max_tokens": 2})).await;
    assert_eq!(code, 200, "{v}");
    // A non-streamed request whose client gives up is cancelled too.
    let (_, before) = running(&s.url("/metrics")).await;
    let gone = reqwest::Client::new()
        .post(s.url("/v1/completions"))
        .timeout(Duration::from_millis(300))
        .json(&json!({"prompt": "another long one", "max_tokens": 4000, "ignore_eos": true}))
        .send()
        .await;
    assert!(gone.is_err(), "the long request should have timed out client-side");
    let mut cancelled = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (run, aborted) = running(&s.url("/metrics")).await;
        if run == 0.0 && aborted > before && s.state.active.load(std::sync::atomic::Ordering::Acquire) == 0 {
            cancelled = true;
            break;
        }
    }
    assert!(cancelled, "the abandoned non-streamed request was not cancelled");
    let stats = s.state.loaded.get().unwrap().engine.stats();
    assert_eq!((stats.blocks_reserved, stats.blocks_used), (0, 0), "no leaked blocks");
}
