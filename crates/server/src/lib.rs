//! TensorFold's OpenAI-compatible server: request types, routes, SSE, keys, metrics and chat rendering.

pub mod auth;
pub mod chat;
pub mod error;
pub mod generate;
pub mod logprobs;
pub mod metrics;
pub mod params;
pub mod routes;
pub mod state;
pub mod stop;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

pub use routes::router;
pub use state::{AppState, Loaded, ServerConfig, load};

/// A log line on stderr; in a terminal it first clears the live throughput line, which is redrawn under it.
pub fn log(line: &str) {
    if std::io::stderr().is_terminal() {
        eprintln!("\r\x1b[2K{line}");
    } else {
        eprintln!("{line}");
    }
}

/// Serves `st` on `listener` until the process ends, loading `dir` in the background (health is 503 until then).
pub async fn serve(listener: tokio::net::TcpListener, st: Arc<AppState>, dir: PathBuf) -> std::io::Result<()> {
    let loader = st.clone();
    let handle = tokio::task::spawn_blocking(move || {
        let loaded = load(&dir, &loader.cfg)?;
        let _ = loader.loaded.set(loaded);
        Ok::<(), String>(())
    });
    let app = router(st);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    match handle.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(std::io::Error::other(e)),
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    }
    server.await.map_err(|e| std::io::Error::other(e.to_string()))?
}
