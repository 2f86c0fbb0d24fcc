//! A server on a free loopback port over a `tiny` synth checkpoint in a temp dir, shared by a test binary.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tensorfold_model::synth::{self, Dsv41Preset, Preset, SynthOptions};
use tensorfold_server::auth::Keys;
use tensorfold_server::{AppState, ServerConfig};

pub struct Server {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Writes a tiny checkpoint (with or without a chat template) and serves it on its own runtime thread.
pub fn start(cfg: ServerConfig, keys: Keys, chat_template: bool) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    synth::write(&options(&dir, chat_template)).expect("synth tiny");
    serve(cfg, keys, dir)
}

/// Serves a tiny DeepSeek V4.1 checkpoint the same way.
pub fn start_dsv41(cfg: ServerConfig) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    synth::write_dsv41(&options(&dir, true).with_preset(Dsv41Preset::Tiny)).expect("synth dsv41 tiny");
    serve(cfg, Keys::open(), dir)
}

fn options(dir: &tempfile::TempDir, chat_template: bool) -> SynthOptions {
    SynthOptions {
        preset: Preset::Tiny,
        seed: 7,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template,
        force: true,
    }
}

fn serve(cfg: ServerConfig, keys: Keys, dir: tempfile::TempDir) -> Server {
    let state = AppState::new(cfg, keys);
    let (tx, rx) = std::sync::mpsc::channel();
    let (st, path) = (state.clone(), dir.path().to_path_buf());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send addr");
            tensorfold_server::serve(listener, st, path).await.expect("serve");
        });
    });
    let addr = rx.recv().expect("server address");
    for _ in 0..600 {
        if state.loaded.get().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(state.loaded.get().is_some(), "model did not load");
    Server { addr, state, _dir: dir }
}

pub fn config(name: &str) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        context: 512,
        max_tokens: 64,
        parallel: 16,
        max_queue: 64,
        kv_cache_bytes: None,
        drafts: true,
        mtp_drafts: 1,
        threads: 1,
        device: test_device(),
        ranks: Default::default(),
        log: false,
    }
}

/// The device `TENSORFOLD_TEST_DEVICE` names (`cpu` by default; `cuda` runs the HTTP suites with the model on the GPU).
fn test_device() -> tensorfold_model::dsv4::forward::device::DeviceSpec {
    match std::env::var("TENSORFOLD_TEST_DEVICE") {
        Ok(spec) => spec
            .parse()
            .unwrap_or_else(|e| panic!("TENSORFOLD_TEST_DEVICE={spec}: {e}")),
        Err(_) => Default::default(),
    }
}

pub async fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new().post(url).json(body).send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Streams `body` to `url`; returns the parsed data chunks (without `[DONE]`) and whether `[DONE]` came.
pub async fn stream(url: &str, body: &Value) -> (Vec<Value>, bool) {
    use eventsource_stream::Eventsource;
    use futures_util::StreamExt;
    let r = reqwest::Client::new().post(url).json(body).send().await.expect("send");
    assert_eq!(r.status().as_u16(), 200, "stream status");
    let mut events = r.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(ev) = events.next().await {
        let ev = ev.expect("event");
        if ev.data == "[DONE]" {
            return (out, true);
        }
        out.push(serde_json::from_str(&ev.data).expect("chunk json"));
    }
    (out, false)
}

/// The text of streamed chunks (completion `text` or chat `delta.content`).
pub fn chunk_texts(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|ch| {
            ch["text"]
                .as_str()
                .or_else(|| ch["delta"]["content"].as_str())
                .unwrap_or("")
                .to_string()
        })
        .collect()
}
