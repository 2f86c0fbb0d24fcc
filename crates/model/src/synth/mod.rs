//! `tensorfold synth`: complete random-weight checkpoints in the official DeepSeek V4 layout.

mod init;
mod presets;

pub mod tokenizer;
mod writer;

pub use presets::Preset;

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::config::CONFIG_FILE;
use crate::error::CheckpointError;

/// What to write and where.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub preset: Preset,
    pub seed: u64,
    pub out: PathBuf,
    /// Largest shard in bytes; a checkpoint that fits in one is written as `model.safetensors`.
    pub shard_bytes: u64,
    /// Write a Jinja chat template into `tokenizer_config.json` (false exercises the native V4 chat format).
    pub chat_template: bool,
    /// Overwrite a checkpoint already in `out`.
    pub force: bool,
}

/// Default largest shard: 4 GiB.
pub const DEFAULT_SHARD_BYTES: u64 = 4 << 30;

/// Files written by one synth run.
#[derive(Clone, Debug)]
pub struct SynthReport {
    pub files: Vec<PathBuf>,
    pub tensor_bytes: u64,
}

/// Writes the checkpoint described by `opts`.
pub fn write(opts: &SynthOptions) -> Result<SynthReport, CheckpointError> {
    let dir = &opts.out;
    if dir.join(CONFIG_FILE).exists() && !opts.force {
        return Err(CheckpointError::Index {
            path: dir.clone(),
            reason: "already holds a checkpoint (config.json); pass --force to overwrite it or choose another --out"
                .into(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
    remove_old_weights(dir)?;
    let config = opts.preset.config();
    let manifest = crate::dsv4::manifest(&config);
    let mut files = writer::write_tensors(dir, &manifest, opts.shard_bytes, |spec| {
        let filled = init::fill(spec, &config, opts.seed);
        (filled.bytes, filled.scale)
    })?;
    let mut config_json = serde_json::to_value(&config).expect("config serialises");
    config_json["dtype"] = json!("bfloat16");
    let generation = json!({
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "do_sample": true,
        "temperature": 1.0,
        "top_p": 1.0,
    });
    let small_files = [
        (CONFIG_FILE, config_json),
        ("generation_config.json", generation),
        ("tokenizer_config.json", tokenizer::tokenizer_config(opts.chat_template)),
    ];
    for (name, value) in small_files {
        let path = dir.join(name);
        writer::write_json(&path, &value)?;
        files.push(path);
    }
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, tokenizer::TOKENIZER_JSON).map_err(|e| CheckpointError::io(&path, e))?;
    files.push(path);
    Ok(SynthReport {
        files,
        tensor_bytes: manifest.num_bytes(),
    })
}

/// Removes safetensors files and the index left by an earlier write, so shards never mix.
fn remove_old_weights(dir: &Path) -> Result<(), CheckpointError> {
    let entries = std::fs::read_dir(dir).map_err(|e| CheckpointError::io(dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".safetensors") || name == crate::checkpoint::INDEX_FILE {
            std::fs::remove_file(entry.path()).map_err(|e| CheckpointError::io(entry.path(), e))?;
        }
    }
    Ok(())
}
