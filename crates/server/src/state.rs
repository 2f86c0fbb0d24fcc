//! Server state: configuration, the loaded model (engine handle, tokenizer, chat format), keys and metrics.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tensorfold_engine::ranks::RankOptions;
use tensorfold_engine::reserve::pool_blocks_for;
use tensorfold_engine::{DraftConfig, Engine, EngineConfig, EngineHandle};
use tensorfold_model::dsv4::forward::device::DeviceSpec;
use tensorfold_model::tokenizer::Tokenizer;

use crate::auth::Keys;
use crate::chat::ChatFormat;
use crate::error::ApiError;
use crate::metrics::Metrics;

/// What `serve` was asked for.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The model id clients name.
    pub name: String,
    /// Longest prompt plus completion per request (capped by the model's own).
    pub context: usize,
    /// Default and largest `max_tokens`.
    pub max_tokens: usize,
    /// Requests run together.
    pub parallel: usize,
    /// Requests that may wait beyond `parallel` before 429.
    pub max_queue: usize,
    /// Bytes of cache blocks; `None` holds `parallel` requests of `context` tokens.
    pub kv_cache_bytes: Option<u64>,
    /// Whether requests may use drafts.
    pub drafts: bool,
    /// Chained MTP drafts per round when drafts are on.
    pub mtp_drafts: usize,
    /// CPU threads for the model.
    pub threads: usize,
    /// Where the model runs.
    pub device: DeviceSpec,
    /// Ranks sharing the model (`--tp`), how they talk and where they run.
    pub ranks: RankOptions,
    /// One line to stderr per finished request (never keys or text).
    pub log: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            name: "tensorfold".into(),
            context: 8192,
            max_tokens: 1024,
            parallel: 16,
            max_queue: 256,
            kv_cache_bytes: None,
            drafts: true,
            mtp_drafts: DraftConfig::default().mtp_drafts,
            threads: 2,
            device: DeviceSpec::Cpu,
            ranks: RankOptions::default(),
            log: true,
        }
    }
}

/// A loaded model behind its engine thread.
pub struct Loaded {
    pub engine: EngineHandle,
    pub tok: Tokenizer,
    pub chat: ChatFormat,
    /// Context per request after the model's limit.
    pub context: usize,
    /// Default temperature and top_p from generation_config.json.
    pub temperature: f32,
    pub top_p: f32,
}

/// Everything the routes share.
pub struct AppState {
    pub cfg: ServerConfig,
    pub loaded: OnceLock<Loaded>,
    pub keys: Keys,
    pub metrics: Metrics,
    pub active: AtomicUsize,
    next_id: AtomicU64,
    pub created: u64,
}

impl AppState {
    pub fn new(cfg: ServerConfig, keys: Keys) -> Arc<AppState> {
        Arc::new(AppState {
            cfg,
            loaded: OnceLock::new(),
            keys,
            metrics: Metrics::new(),
            active: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            created: unix_now(),
        })
    }

    /// The model, or 503 while it loads.
    pub fn model(&self) -> Result<&Loaded, ApiError> {
        self.loaded.get().ok_or_else(ApiError::loading)
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn generation_defaults(dir: &Path) -> (f32, f32) {
    let v: serde_json::Value = std::fs::read_to_string(dir.join("generation_config.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let get = |k: &str, d: f32| v.get(k).and_then(|x| x.as_f64()).map(|x| x as f32).unwrap_or(d);
    (get("temperature", 1.0), get("top_p", 1.0))
}

/// Loads the checkpoint in `dir` and starts its engine.
pub fn load(dir: &Path, cfg: &ServerConfig) -> Result<Loaded, String> {
    let loaded = tensorfold_engine::ranks::load(dir, cfg.device, cfg.threads, &cfg.ranks)
        .map_err(|e| format!("loading {}: {e}", dir.display()))?;
    let tok = Tokenizer::load(dir, loaded.bos_token_id, loaded.eos_token_id).map_err(|e| e.to_string())?;
    let chat = ChatFormat::load(dir)?;
    let context = cfg.context.min(loaded.max_context).max(2);
    let ecfg = EngineConfig {
        max_lanes: cfg.parallel.max(1),
        pool_blocks: match cfg.kv_cache_bytes {
            Some(bytes) => loaded.runner.layout().blocks_in(bytes),
            None => pool_blocks_for(loaded.runner.as_ref(), context, cfg.parallel.max(1)),
        },
        drafts: if cfg.drafts {
            DraftConfig {
                mtp_drafts: cfg.mtp_drafts,
                ..DraftConfig::default()
            }
        } else {
            DraftConfig::off()
        },
        ..EngineConfig::default()
    };
    let engine = Engine::new(loaded.runner, ecfg);
    let (temperature, top_p) = generation_defaults(dir);
    Ok(Loaded {
        engine: EngineHandle::spawn(engine),
        tok,
        chat,
        context,
        temperature,
        top_p,
    })
}
