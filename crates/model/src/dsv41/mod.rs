//! Family `dsv41`: DeepSeek V4.1 (Flash): tensor manifest, Engram hashing, size summary, checkpoint loading and the forward pass.

pub mod engram;
pub mod forward;
mod geometry;
mod manifest;
mod summary;
pub mod weights;

pub use manifest::manifest;
pub use summary::Summary;

use std::path::Path;

use crate::checkpoint::Checkpoint;
use crate::config::dsv41::Dsv41Config;
use crate::error::CheckpointError;
use crate::manifest::Problem;

/// Family name used in reports and errors.
pub const FAMILY: &str = "dsv41";

/// A DeepSeek V4.1 checkpoint whose config parsed and whose tensors match the manifest.
pub struct Dsv41Checkpoint {
    pub config: Dsv41Config,
    pub weights: Checkpoint,
}

impl Dsv41Checkpoint {
    /// Opens `dir`, parses its config and checks every tensor against the manifest.
    pub fn open(dir: &Path) -> Result<Dsv41Checkpoint, CheckpointError> {
        let config = Dsv41Config::read(dir)?;
        let weights = Checkpoint::open(dir)?;
        let mut problems = manifest(&config.text_config).problems(&weights);
        if config.vision_config.is_some() {
            problems.retain(|p| !matches!(p, Problem::Extra { name, .. } if !is_text_tensor(name)));
        }
        if !problems.is_empty() {
            return Err(CheckpointError::Manifest {
                dir: dir.to_path_buf(),
                family: FAMILY,
                problems,
            });
        }
        Ok(Dsv41Checkpoint { config, weights })
    }
}

/// Whether `name` belongs to the text model (the vision tower's tensors are left unread).
pub fn is_text_tensor(name: &str) -> bool {
    TEXT_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Name prefixes of every text-model tensor.
const TEXT_PREFIXES: [&str; 5] = ["embed.", "layers.", "mtp.", "norm.", "head."];
