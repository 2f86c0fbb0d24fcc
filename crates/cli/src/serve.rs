//! `tensorfold serve`: the OpenAI-compatible HTTP server over one model.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Args;
use tensorfold_model::dsv4::forward::device::DeviceSpec;
use tensorfold_server::auth::Keys;
use tensorfold_server::{AppState, ServerConfig};

use crate::default_model;

#[derive(Args)]
pub struct ServeArgs {
    /// Checkpoint folder; the built-in tensorfold-demo model when omitted.
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The model id clients name (default: the checkpoint folder's name).
    #[arg(long)]
    name: Option<String>,
    /// An accepted API key (repeatable); none and no --api-key-file means no key is needed.
    #[arg(long = "api-key")]
    api_keys: Vec<String>,
    /// A file of API keys, one a line; must not be readable by others; re-read when it changes.
    #[arg(long)]
    api_key_file: Option<PathBuf>,
    /// Longest prompt plus completion per request.
    #[arg(long, default_value_t = 8192)]
    context: usize,
    /// Default and largest max_tokens.
    #[arg(long, default_value_t = 1024)]
    max_tokens: usize,
    /// Requests run together.
    #[arg(long, default_value_t = 16)]
    parallel: usize,
    /// Requests that may wait beyond --parallel before 429.
    #[arg(long, default_value_t = 256)]
    max_queue: usize,
    /// KV cache memory in GiB (sequences' blocks, and room for the state a running request keeps outside them); default: room for --parallel requests of --context tokens; the pool gets as many 128-token blocks as fit.
    #[arg(long)]
    kv_cache_gib: Option<f64>,
    /// Serve every request without drafts (the serial reference).
    #[arg(long)]
    no_drafts: bool,
    /// Model drafts per round: chained MTP (V4) or a DSpark block, at most 5 (V4.1); 0 drafts by context copies only.
    #[arg(long, default_value_t = tensorfold_engine::DraftConfig::default().mtp_drafts)]
    mtp_drafts: usize,
    /// CPU threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Where the model runs: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: DeviceSpec,
    #[command(flatten)]
    ranks: crate::ranks::RankArgs,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let dir = match &args.model {
        Some(d) => d.clone(),
        None => default_model::dir()?,
    };
    let name = args.name.clone().unwrap_or_else(|| match &args.model {
        Some(d) => d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "tensorfold".into()),
        None => default_model::NAME.to_string(),
    });
    let keys = Keys::new(&args.api_keys, args.api_key_file.as_deref()).map_err(|e| anyhow!(e))?;
    let cfg = ServerConfig {
        name,
        context: args.context,
        max_tokens: args.max_tokens,
        parallel: args.parallel.max(1),
        max_queue: args.max_queue,
        kv_cache_bytes: args.kv_cache_gib.map(crate::generate::gib_bytes).transpose()?,
        drafts: !args.no_drafts,
        mtp_drafts: args.mtp_drafts,
        threads: args.threads.max(1),
        device: args.device,
        ranks: args.ranks.options(),
        log: true,
    };
    let st = AppState::new(cfg, keys);
    let rt = tokio::runtime::Runtime::new().context("starting the runtime")?;
    rt.block_on(async move {
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        tensorfold_server::log(&format!(
            "serving `{}` from {} on http://{}",
            st.cfg.name,
            dir.display(),
            listener.local_addr()?
        ));
        if std::io::stderr().is_terminal() {
            tokio::spawn(live_line(st.clone()));
        }
        tensorfold_server::serve(listener, st, dir)
            .await
            .map_err(|e| anyhow!(e))
    })
}

/// One live throughput line under the log, rewritten every second.
async fn live_line(st: Arc<AppState>) {
    let mut last = 0u64;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(m) = st.loaded.get() else { continue };
        let s = m.engine.stats();
        let rate = s.generated_tokens.saturating_sub(last);
        last = s.generated_tokens;
        eprint!(
            "\r\x1b[2K{rate} tokens/s | running {} waiting {} | kv {}/{} blocks",
            s.running, s.waiting, s.blocks_used, s.blocks_total
        );
    }
}
