//! What the engine needs from a model: a forward pass over a batch of rows with each sequence's state, and its MTP layer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use tensorfold_model::config::dsv4::Dsv4Config;
use tensorfold_model::dsv4::batch::Batch;
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::device::Device;
use tensorfold_model::dsv4::forward::parallel::RankGroup;
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions, Output};

/// What a pass returns: logits of the rows asked for, and the output streams of every row.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    pub logits: Vec<f32>,  // [logit_rows, vocab]
    pub streams: Vec<f32>, // [rows, hc, D]
}

/// A model the engine can drive.
pub trait Runner: Send {
    /// Logits `[logit_rows.len(), vocab]` for the given rows of `batch`, advancing each sequence's state in `cache`.
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize]) -> Result<Rows, String>;
    /// MTP layer 0 on `batch`: row i joins `streams` row i with the embedding of the token that follows it.
    fn forward_mtp(
        &self,
        batch: &Batch,
        streams: &[f32],
        cache: &mut Dsv4Cache,
        logit_rows: &[usize],
    ) -> Result<Rows, String>;
    fn config(&self) -> &Dsv4Config;
    fn vocab_size(&self) -> usize {
        self.config().vocab_size
    }
    /// Longest sequence (prompt plus generated tokens) the model accepts.
    fn max_context(&self) -> usize {
        self.config().max_position_embeddings
    }
}

/// DeepSeek V4 on the CPU or on a GPU (weights resident there, the sequence state on the host).
pub struct Dsv4Runner {
    pub model: Dsv4Model,
    pub device: Device,
    /// Ranks sharing every pass (see `ranks.rs`); `None` runs on this device alone.
    pub ranks: Option<Arc<RankGroup>>,
}

impl Dsv4Runner {
    pub fn new(model: Dsv4Model, device: impl Into<Device>) -> Dsv4Runner {
        Dsv4Runner {
            model,
            device: device.into(),
            ranks: None,
        }
    }

    /// Runs `pass`, turning a device failure (a panic inside the kernels' dispatch) into the pass's error.
    fn guarded(&self, pass: impl FnOnce() -> Result<Output, String>) -> Result<Rows, String> {
        let out = match catch_unwind(AssertUnwindSafe(pass)) {
            Ok(out) => out?,
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a kernel panicked".into());
                return Err(format!("the forward pass failed: {why}"));
            }
        };
        Ok(Rows {
            logits: out.logits,
            streams: out.last_streams,
        })
    }
}

fn options(logit_rows: &[usize], ranks: &Option<Arc<RankGroup>>) -> ForwardOptions {
    ForwardOptions {
        keep_layers: false,
        logit_rows: Some(logit_rows.to_vec()),
        ranks: ranks.clone(),
    }
}

impl Runner for Dsv4Runner {
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize]) -> Result<Rows, String> {
        let dev = self.device.clone();
        self.guarded(|| {
            self.model
                .forward_with(batch, cache, dev, &options(logit_rows, &self.ranks))
        })
    }

    fn forward_mtp(
        &self,
        batch: &Batch,
        streams: &[f32],
        cache: &mut Dsv4Cache,
        logit_rows: &[usize],
    ) -> Result<Rows, String> {
        let dev = self.device.clone();
        self.guarded(|| {
            self.model
                .forward_mtp_with(0, batch, streams, cache, dev, &options(logit_rows, &self.ranks))
        })
    }

    fn config(&self) -> &Dsv4Config {
        &self.model.config
    }
}
