//! What the engine needs from a model: a forward pass over a batch of rows with each sequence's state, the shape of that state, and its MTP layer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::blocks::BlockLayout;
use tensorfold_model::dsv4::cache::{CacheGeometry, Dsv4Cache};
use tensorfold_model::dsv4::forward::device::Device;
use tensorfold_model::dsv4::forward::parallel::RankGroup;
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions, Output};
use tensorfold_model::dsv41::forward::Dsv41Model;
use tensorfold_model::dsv41::forward::dspark::Draft;

/// What a pass returns: logits of the rows asked for (or their greedy picks), and the output streams of every row.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    pub logits: Vec<f32>,  // [logit_rows, vocab]; empty when picks were asked for
    pub picks: Vec<u32>,   // [logit_rows] when asked for
    pub streams: Vec<f32>, // [rows, hc, D]
}

/// A model the engine can drive.
pub trait Runner: Send {
    /// Logits `[logit_rows.len(), vocab]` for the given rows of `batch` (with `picks`, each row's greedy pick instead, made where the pass runs), advancing each sequence's state in `cache`.
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize], picks: bool) -> Result<Rows, String>;
    /// MTP layer 0 on `batch`: row i joins `streams` row i with the embedding of the token that follows it.
    fn forward_mtp(
        &self,
        batch: &Batch,
        streams: &[f32],
        cache: &mut Dsv4Cache,
        logit_rows: &[usize],
    ) -> Result<Rows, String>;
    /// Drafts of a block the model makes itself (DeepSeek V4.1's DSpark), per lane `(sequence, token sampled after its last position)`; `pick(lane, j, logits)` draws draft j. Reads the cache only.
    fn draft_block(
        &self,
        _lanes: &[(SeqSlot, u32)],
        _cache: &Dsv4Cache,
        _pick: &mut dyn FnMut(usize, usize, &[f32]) -> u32,
    ) -> Result<Vec<Vec<Draft>>, String> {
        Err("this model has no block drafter".into())
    }
    /// Drafts `draft_block` makes per lane; 0 when the model has none.
    fn block_drafts(&self) -> usize {
        0
    }
    /// The shape of each sequence's state (windows, compressors, MTP layers).
    fn geometry(&self) -> &dyn CacheGeometry;
    /// Where each layer's state sits in a cache block.
    fn layout(&self) -> &BlockLayout;
    fn vocab_size(&self) -> usize;
    /// Longest sequence (prompt plus generated tokens) the model accepts.
    fn max_context(&self) -> usize;
    /// Values per row of the streams a pass returns (`hc_mult * hidden_size`).
    fn stream_width(&self) -> usize;
    /// The config's BOS and EOS ids.
    fn special_ids(&self) -> (u32, u32);
    /// Why the runner can no longer run passes (a rank it shares them with stopped), once it cannot.
    fn down(&self) -> Option<String> {
        None
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
                return Err(why);
            }
        };
        Ok(Rows {
            logits: out.logits,
            picks: out.picks,
            streams: out.last_streams,
        })
    }
}

fn options(logit_rows: &[usize], ranks: &Option<Arc<RankGroup>>, picks: bool) -> ForwardOptions {
    ForwardOptions {
        keep_layers: false,
        logit_rows: Some(logit_rows.to_vec()),
        ranks: ranks.clone(),
        picks,
    }
}

impl Runner for Dsv4Runner {
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize], picks: bool) -> Result<Rows, String> {
        let dev = self.device.clone();
        self.guarded(|| {
            self.model
                .forward_with(batch, cache, dev, &options(logit_rows, &self.ranks, picks))
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
                .forward_mtp_with(0, batch, streams, cache, dev, &options(logit_rows, &self.ranks, false))
        })
    }

    fn geometry(&self) -> &dyn CacheGeometry {
        &self.model.config
    }

    fn layout(&self) -> &BlockLayout {
        &self.model.layout
    }

    fn vocab_size(&self) -> usize {
        self.model.config.vocab_size
    }

    fn max_context(&self) -> usize {
        self.model.config.max_position_embeddings
    }

    fn stream_width(&self) -> usize {
        self.model.config.hc_mult * self.model.config.hidden_size
    }

    fn special_ids(&self) -> (u32, u32) {
        (self.model.config.bos_token_id, self.model.config.eos_token_id)
    }

    fn down(&self) -> Option<String> {
        self.ranks.as_ref().and_then(|r| r.broken())
    }
}

/// DeepSeek V4.1 on the CPU (model drafts from its DSpark stages).
pub struct Dsv41Runner {
    pub model: Dsv41Model,
    pub launch: tensorfold_kernels::cpu::CpuLaunch,
}

impl Runner for Dsv41Runner {
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize], picks: bool) -> Result<Rows, String> {
        let out = self
            .model
            .forward_with(batch, cache, self.launch, &options(logit_rows, &None, picks))?;
        Ok(Rows {
            logits: out.logits,
            picks: out.picks,
            streams: out.last_streams,
        })
    }

    fn forward_mtp(&self, _: &Batch, _: &[f32], _: &mut Dsv4Cache, _: &[usize]) -> Result<Rows, String> {
        Err("DeepSeek V4.1 has no V4 MTP layer; its model drafts come from the DSpark stages".into())
    }

    fn draft_block(
        &self,
        lanes: &[(SeqSlot, u32)],
        cache: &Dsv4Cache,
        pick: &mut dyn FnMut(usize, usize, &[f32]) -> u32,
    ) -> Result<Vec<Vec<Draft>>, String> {
        self.model.dspark_draft(lanes, cache, self.launch, pick)
    }

    fn block_drafts(&self) -> usize {
        match self.model.weights.dspark {
            Some(_) => self.model.config.dspark_block_size,
            None => 0,
        }
    }

    fn geometry(&self) -> &dyn CacheGeometry {
        &self.model.config
    }

    fn layout(&self) -> &BlockLayout {
        &self.model.layout
    }

    fn vocab_size(&self) -> usize {
        self.model.config.vocab_size
    }

    fn max_context(&self) -> usize {
        self.model.config.max_position_embeddings
    }

    fn stream_width(&self) -> usize {
        self.model.config.hc_mult * self.model.config.hidden_size
    }

    fn special_ids(&self) -> (u32, u32) {
        (self.model.config.bos_token_id, self.model.config.eos_token_id)
    }
}

/// A checkpoint's runner and the special ids its tokenizer needs.
pub struct LoadedRunner {
    pub runner: Box<dyn Runner>,
    pub bos_token_id: u32,
    pub eos_token_id: u32,
    /// Longest context the model accepts.
    pub max_context: usize,
}

/// Loads the checkpoint in `dir` with the family its `config.json` names (`model_type`).
pub fn load_runner(dir: &std::path::Path, device: Device) -> Result<LoadedRunner, String> {
    use tensorfold_model::config::{dsv4, dsv41, model_type};
    use tensorfold_model::dsv4::semantics::Semantics;
    let kind = model_type(dir).map_err(|e| e.to_string())?;
    let runner: Box<dyn Runner> = if kind == dsv41::MODEL_TYPE {
        let Some(&launch) = device.cpu() else {
            return Err(format!("{kind} runs on the CPU only for now; run with --device cpu"));
        };
        let model = tensorfold_model::dsv41::forward::load_model(dir)?;
        Box::new(Dsv41Runner { model, launch })
    } else if kind == dsv4::MODEL_TYPE {
        let model = tensorfold_model::dsv4::load_model(dir, Semantics::official()).map_err(|e| e.to_string())?;
        // Weights go to the GPU at load, so the first request pays no upload and a model too large fails here.
        model
            .upload(&device)
            .map_err(|e| format!("uploading the weights to the GPU: {e}"))?;
        Box::new(Dsv4Runner::new(model, device))
    } else {
        return Err(format!(
            "config.json has model_type `{kind}`; this engine runs `{}` and `{}`",
            dsv4::MODEL_TYPE,
            dsv41::MODEL_TYPE
        ));
    };
    let (bos_token_id, eos_token_id) = runner.special_ids();
    let max_context = runner.max_context();
    Ok(LoadedRunner {
        runner,
        bos_token_id,
        eos_token_id,
        max_context,
    })
}
