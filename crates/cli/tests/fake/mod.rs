//! A fake OpenAI-compatible server that streams canned replies in small pieces, to check what the benchmarks conclude.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// What the fake says in its replies.
#[derive(Clone, Default)]
pub struct Mode {
    /// Send the `tensorfold` extension object (token_sha and cached_tokens).
    pub extension: bool,
    /// The request with this seed gets another token_sha the second time it is sent.
    pub perturb_seed: Option<u64>,
    /// `cached_tokens` reported in usage (and the extension); None leaves both out.
    pub cached: Option<usize>,
}

/// Serves `mode` on a free loopback port until the process ends; returns the base URL.
pub fn start(mode: Mode) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen: Arc<Mutex<HashMap<u64, usize>>> = Arc::default();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (mode, seen) = (mode.clone(), seen.clone());
            std::thread::spawn(move || answer(conn, &mode, &seen));
        }
    });
    url
}

fn answer(mut conn: TcpStream, mode: &Mode, seen: &Mutex<HashMap<u64, usize>>) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().expect("content length");
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    if head.starts_with("GET /v1/models") {
        let v = json!({"object": "list", "data": [{"id": "fake", "object": "model"}]}).to_string();
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{v}",
            v.len()
        );
        let _ = conn.write_all(reply.as_bytes());
        return;
    }
    let req: Value = serde_json::from_slice(&body).expect("request json");
    let seed = req["seed"].as_u64().expect("seed");
    let times = {
        let mut s = seen.lock().unwrap();
        let n = s.entry(seed).or_default();
        *n += 1;
        *n
    };
    let max_tokens = req["max_tokens"].as_u64().expect("max_tokens");
    let mut sha = format!("{seed:064x}");
    if mode.perturb_seed == Some(seed) && times == 2 {
        sha.replace_range(..1, "f");
    }
    let mut events: Vec<Value> = (0..max_tokens)
        .map(|i| json!({"choices": [{"index": 0, "text": format!(" é{i}"), "finish_reason": null}]}))
        .collect();
    events.push(json!({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}));
    let mut last = json!({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": max_tokens,
        "total_tokens": 100 + max_tokens}});
    if mode.extension {
        last["tensorfold"] = json!({"token_sha": sha, "drafted": 0, "accepted": 0});
    }
    if let Some(c) = mode.cached {
        last["usage"]["prompt_tokens_details"] = json!({"cached_tokens": c});
        if mode.extension {
            last["tensorfold"]["cached_tokens"] = json!(c);
        }
    }
    events.push(last);
    let mut stream = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
    for e in events {
        stream.push_str(&format!("data: {e}\n\n"));
    }
    stream.push_str("data: [DONE]\n\n");
    // Pieces of 5 bytes cut through lines, JSON and the two-byte `é`, so events arrive split at every kind of place.
    conn.set_nodelay(true).expect("nodelay");
    for piece in stream.as_bytes().chunks(5) {
        if conn.write_all(piece).and_then(|_| conn.flush()).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_micros(300));
    }
}
