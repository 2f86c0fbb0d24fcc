//! The official `openai` Python package against the server (skipped, with the reason, when it is not installed).

mod common;

use std::process::Command;

use common::{config, start};
use tensorfold_server::auth::Keys;

/// `$TENSORFOLD_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("TENSORFOLD_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn official_openai_client() {
    let py = python();
    let probe = Command::new(&py).args(["-c", "import openai"]).output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "SKIPPED official_openai_client: `{py} -c \"import openai\"` failed ({}); pip install openai or set TENSORFOLD_PYTHON",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED official_openai_client: cannot run `{py}`: {e}");
            return;
        }
    }
    let s = start(config("tiny"), Keys::new(&["sk-py".to_string()], None).unwrap(), true);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openai_client.py");
    let out = Command::new(&py)
        .args([script, &s.url("/v1"), "tiny", "sk-py"])
        .output()
        .expect("running the client script");
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "openai client failed:\n{so}\n{se}");
    assert!(so.contains("all checks passed"), "{so}");
}
