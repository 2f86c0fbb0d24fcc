//! `tensorfold synth`: complete random-weight checkpoints in the official DeepSeek V4 and V4.1 layouts.

mod init;
mod presets;
mod presets_v41;

pub mod tokenizer;
mod writer;

pub use presets::Preset;
pub use presets_v41::Dsv41Preset;

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::config::CONFIG_FILE;
use crate::error::CheckpointError;

/// What to write and where; `P` is the family's preset (DeepSeek V4 unless named).
#[derive(Clone, Debug)]
pub struct SynthOptions<P = Preset> {
    pub preset: P,
    pub seed: u64,
    pub out: PathBuf,
    /// Largest shard in bytes; a checkpoint that fits in one is written as `model.safetensors`.
    pub shard_bytes: u64,
    /// Write a Jinja chat template into `tokenizer_config.json` (false exercises the native V4 chat format).
    pub chat_template: bool,
    /// Overwrite a checkpoint already in `out`.
    pub force: bool,
}

impl<P> SynthOptions<P> {
    /// The same options with another family's preset.
    pub fn with_preset<Q>(self, preset: Q) -> SynthOptions<Q> {
        SynthOptions {
            preset,
            seed: self.seed,
            out: self.out,
            shard_bytes: self.shard_bytes,
            chat_template: self.chat_template,
            force: self.force,
        }
    }
}

/// Default largest shard: 4 GiB.
pub const DEFAULT_SHARD_BYTES: u64 = 4 << 30;

/// Files written by one synth run.
#[derive(Clone, Debug)]
pub struct SynthReport {
    pub files: Vec<PathBuf>,
    pub tensor_bytes: u64,
}

/// Writes the DeepSeek V4 checkpoint described by `opts`.
pub fn write(opts: &SynthOptions) -> Result<SynthReport, CheckpointError> {
    let config = opts.preset.config();
    let mut config_json = serde_json::to_value(&config).expect("config serialises");
    config_json["dtype"] = json!("bfloat16");
    let params = init::InitParams::dsv4(&config);
    let ids = (config.bos_token_id, config.eos_token_id);
    write_checkpoint(opts, &crate::dsv4::manifest(&config), config_json, ids, &params)
}

/// Writes the DeepSeek V4.1 checkpoint described by `opts`, Engram tables included.
pub fn write_dsv41(opts: &SynthOptions<Dsv41Preset>) -> Result<SynthReport, CheckpointError> {
    let config = opts.preset.config();
    let mut config_json = serde_json::to_value(&config).expect("config serialises");
    config_json["dtype"] = json!("bfloat16");
    let text = &config.text_config;
    let params = init::InitParams::dsv41(text);
    let ids = (text.bos_token_id, text.eos_token_id);
    write_checkpoint(opts, &crate::dsv41::manifest(text), config_json, ids, &params)
}

/// Writes tensors, config, generation config and tokenizer files into `opts.out`.
fn write_checkpoint<P>(
    opts: &SynthOptions<P>,
    manifest: &crate::manifest::Manifest,
    config_json: serde_json::Value,
    (bos_token_id, eos_token_id): (u32, u32),
    params: &init::InitParams,
) -> Result<SynthReport, CheckpointError> {
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
    let mut files = writer::write_tensors(dir, manifest, opts.shard_bytes, |spec| {
        let filled = init::fill(spec, params, opts.seed);
        (filled.bytes, filled.scale)
    })?;
    let generation = json!({
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
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
