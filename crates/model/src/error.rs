//! Errors from reading checkpoints and configs; each names the file and says what to do.

use std::path::PathBuf;

use crate::manifest::Problem;

/// Anything that stops a checkpoint from being read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not a readable safetensors file: {reason}", path.display())]
    Header { path: PathBuf, reason: String },
    #[error("{}: tensor `{name}`: {reason}", path.display())]
    Tensor {
        path: PathBuf,
        name: String,
        reason: String,
    },
    #[error("{}: {reason}", path.display())]
    Index { path: PathBuf, reason: String },
    #[error("{}: field `{field}`: {reason}", path.display())]
    Config {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error("{}: {} tensor problem(s) against the {family} manifest:\n{}\nThe weights and config.json must come from the same model; re-download or re-convert the files named above.", dir.display(), problems.len(), problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Manifest {
        dir: PathBuf,
        family: &'static str,
        problems: Vec<Problem>,
    },
}

impl CheckpointError {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CheckpointError::Io {
            path: path.into(),
            source,
        }
    }
}
