//! `--tp N` as processes: rank 0 starts N-1 `rank-worker` processes; the tokens equal one rank's, and a worker that dies leaves rank 0 answering with a clear error.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

fn tensorfold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorfold"))
        .args(args)
        .output()
        .unwrap()
}

fn tiny() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = tensorfold(&["synth", "--preset", "tiny", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// The token_sha `generate --stats` prints, with the stderr it came in.
fn token_sha(model: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec![
        "generate",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "one two three four",
    ];
    args.extend(["--max-tokens", "10", "--stats", "--ignore-eos"]);
    args.extend(extra);
    let out = tensorfold(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {err}");
    let sha = err
        .split("token_sha ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token_sha in: {err}"));
    (sha.to_string(), err)
}

#[test]
fn token_sha_on_1_2_and_4_processes_equals_one_rank() {
    let dir = tiny();
    let settings: [&[&str]; 2] = [&["--temperature", "0"], &["--temperature", "0.9", "--mtp-drafts", "2"]];
    for sampling in settings {
        let (reference, _) = token_sha(dir.path(), &[&["--seed", "7"][..], sampling].concat());
        for tp in [1usize, 2, 4] {
            let n = tp.to_string();
            let args = [
                &["--tp", &n, "--ranks-transport", "processes", "--seed", "7"][..],
                sampling,
            ]
            .concat();
            let (sha, err) = token_sha(dir.path(), &args);
            assert_eq!(sha, reference, "--tp {tp} over processes, {sampling:?}: {err}");
            if tp > 1 {
                for r in 0..tp {
                    assert!(
                        err.contains(&format!("rank {r} of {tp}: holds")),
                        "rank {r} reports its share: {err}"
                    );
                }
            }
        }
    }
}

#[test]
fn nccl_ranks_on_the_cpu_are_refused_with_the_choices() {
    let dir = tiny();
    let args = [
        "generate",
        "--model",
        dir.path().to_str().unwrap(),
        "--prompt",
        "x",
        "--tp",
        "2",
        "--ranks-transport",
        "nccl",
    ];
    let out = tensorfold(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("nccl needs --device cuda") && err.contains("processes or threads"),
        "{err}"
    );
}

#[test]
fn a_worker_that_cannot_start_is_named_with_its_exit() {
    let dir = tiny();
    let out = Command::new(env!("CARGO_BIN_EXE_tensorfold"))
        .args(["generate", "--model", dir.path().to_str().unwrap(), "--prompt", "x"])
        .args(["--tp", "2", "--ranks-transport", "processes"])
        .env("TENSORFOLD_RANK_EXE", "false")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("rank 1 (pid") && err.contains("exited while starting"),
        "{err}"
    );
}

/// A server child whose stderr lines arrive on a channel; killed on drop.
struct Server {
    child: Child,
    lines: Receiver<String>,
    log: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(model: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tensorfold"))
            .args(["serve", "--model", model.to_str().unwrap(), "--port", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// The first log line containing `what` (waiting up to a minute for it).
    fn wait_for(&mut self, what: &str) -> String {
        if let Some(l) = self.log.iter().find(|l| l.contains(what)) {
            return l.clone();
        }
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no `{what}` in the server's log: {:?}", self.log));
            self.log.push(line.clone());
            if line.contains(what) {
                return line;
            }
        }
    }
}

/// Status and body of one HTTP/1.1 request to `addr`.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

#[test]
fn a_worker_that_dies_leaves_rank_0_serving_a_clear_error() {
    let dir = tiny();
    let mut server = Server::start(dir.path(), &["--tp", "2", "--ranks-transport", "processes"]);
    let pid = server
        .wait_for("rank 1 of 2: pid")
        .split_whitespace()
        .nth(5)
        .unwrap()
        .to_string();
    let addr = server
        .wait_for("on http://")
        .rsplit("http://")
        .next()
        .unwrap()
        .trim()
        .to_string();
    let body = r#"{"prompt":"hello","max_tokens":4,"temperature":0}"#;
    for _ in 0..600 {
        if http(&addr, "GET", "/health", "").0 == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, reply) = http(&addr, "POST", "/v1/completions", body);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(http(&addr, "GET", "/health", "").0, 200);

    assert!(Command::new("kill").args(["-9", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(200));
    for attempt in 0..2 {
        let (status, reply) = http(&addr, "POST", "/v1/completions", body);
        assert_eq!(status, 500, "attempt {attempt}: {reply}");
        assert!(
            reply.contains("rank 1 stopped") && reply.contains("restart"),
            "attempt {attempt}: {reply}"
        );
    }
    let (status, reply) = http(&addr, "GET", "/health", "");
    assert_eq!(status, 503, "{reply}");
    assert!(reply.contains("\"down\""), "{reply}");
}
