//! API keys: 401 with WWW-Authenticate, command-line and file keys, file permission check and reload.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{config, start};
use serde_json::{Value, json};
use tensorfold_server::auth::Keys;

fn write_keys(path: &std::path::Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_key_file_readable_by_others_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys");
    write_keys(&path, "sk-a\n", 0o644);
    let err = Keys::new(&[], Some(&path)).err().expect("refused");
    assert!(err.contains("chmod 600"), "{err}");
    write_keys(&path, "sk-a\n", 0o600);
    assert!(Keys::new(&[], Some(&path)).is_ok());
}

#[tokio::test]
async fn keys_guard_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys");
    write_keys(&path, "# comment\nsk-file-one\n", 0o600);
    let keys = Keys::new(&["sk-cli".to_string()], Some(&path)).unwrap();
    let s = start(config("tiny"), keys, true);
    let c = reqwest::Client::new();
    let body = json!({"prompt": "hi", "max_tokens": 1});
    let call = |key: Option<&str>| {
        let mut r = c.post(s.url("/v1/completions")).json(&body);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    for key in [None, Some("wrong"), Some("sk-cli-extra")] {
        let r = call(key).await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{key:?}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "invalid_api_key");
    }
    assert_eq!(call(Some("sk-cli")).await.unwrap().status().as_u16(), 200);
    assert_eq!(call(Some("sk-file-one")).await.unwrap().status().as_u16(), 200);
    let r = c.get(s.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(c.get(s.url("/health")).send().await.unwrap().status().as_u16(), 200);
    // The file is re-read when it changes.
    write_keys(&path, "sk-file-two-longer\n", 0o600);
    assert_eq!(call(Some("sk-file-two-longer")).await.unwrap().status().as_u16(), 200);
    assert_eq!(call(Some("sk-file-one")).await.unwrap().status().as_u16(), 401);
}
