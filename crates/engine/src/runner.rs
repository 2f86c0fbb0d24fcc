//! What the engine needs from a model: a forward pass over a batch of rows with each sequence's state.

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::batch::Batch;
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions};

/// A model the engine can drive.
pub trait Runner: Send {
    /// Logits `[logit_rows.len(), vocab]` for the given rows of `batch`, advancing each sequence's state in `cache`.
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize]) -> Result<Vec<f32>, String>;
    fn vocab_size(&self) -> usize;
    /// Longest sequence (prompt plus generated tokens) the model accepts.
    fn max_context(&self) -> usize;
}

/// DeepSeek V4 on the CPU.
pub struct Dsv4Runner {
    pub model: Dsv4Model,
    pub launch: CpuLaunch,
}

impl Runner for Dsv4Runner {
    fn forward(&self, batch: &Batch, cache: &mut Dsv4Cache, logit_rows: &[usize]) -> Result<Vec<f32>, String> {
        let opts = ForwardOptions {
            keep_layers: false,
            logit_rows: Some(logit_rows.to_vec()),
        };
        Ok(self.model.forward_with(batch, cache, self.launch, &opts)?.logits)
    }

    fn vocab_size(&self) -> usize {
        self.model.config.vocab_size
    }

    fn max_context(&self) -> usize {
        self.model.config.max_position_embeddings
    }
}
