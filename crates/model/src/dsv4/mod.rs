//! Family `dsv4`: DeepSeek V4 (Flash, Pro): tensor manifest, size summary and checkpoint loading.

pub mod batch;
pub mod blocks;
pub mod cache;
pub mod forward;
pub mod groups;
mod manifest;
pub mod semantics;
pub mod share;
mod summary;
pub mod weights;

pub use manifest::manifest;
pub use summary::{KvBytes, Summary};

use std::path::Path;

use crate::checkpoint::Checkpoint;
use crate::config::dsv4::Dsv4Config;
use crate::error::CheckpointError;

/// Family name used in reports and errors.
pub const FAMILY: &str = "dsv4";

/// A DeepSeek V4 checkpoint whose config parsed and whose tensors match the manifest.
pub struct Dsv4Checkpoint {
    pub config: Dsv4Config,
    pub weights: Checkpoint,
}

/// Opens, checks and views the checkpoint in `dir` as a model with `semantics`.
pub fn load_model(dir: &Path, semantics: semantics::Semantics) -> Result<forward::Dsv4Model, CheckpointError> {
    let ckpt = Dsv4Checkpoint::open(dir)?;
    let weights = weights::Dsv4Weights::new(&ckpt.weights, &ckpt.config);
    Ok(forward::Dsv4Model::new(ckpt.config, weights, semantics))
}

impl Dsv4Checkpoint {
    /// Opens `dir`, parses its config and checks every tensor against the manifest.
    pub fn open(dir: &Path) -> Result<Dsv4Checkpoint, CheckpointError> {
        let config = Dsv4Config::read(dir)?;
        let weights = Checkpoint::open(dir)?;
        manifest(&config).check(&weights)?;
        check_hash_tables(&weights, config.n_routed_experts)?;
        Ok(Dsv4Checkpoint { config, weights })
    }
}

/// Every hash-routing table (`*.gate.tid2eid`, I64) names only routed experts `0..experts`.
fn check_hash_tables(ckpt: &Checkpoint, experts: usize) -> Result<(), CheckpointError> {
    for (name, entry) in ckpt.tensors().iter().filter(|(n, _)| n.ends_with(".gate.tid2eid")) {
        let view = ckpt.get(name).expect("listed tensor");
        let bad = view
            .bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .enumerate()
            .find(|&(_, e)| e < 0 || e >= experts as i64);
        if let Some((at, e)) = bad {
            let k = view.shape.last().copied().unwrap_or(1).max(1);
            return Err(CheckpointError::Tensor {
                path: ckpt.file_of(entry).to_path_buf(),
                name: name.clone(),
                reason: format!(
                    "token {} routes to expert {e}, but config.json has {experts} routed experts (0..{experts}); \
                     the hash table and config.json must come from the same model",
                    at / k
                ),
            });
        }
    }
    Ok(())
}
