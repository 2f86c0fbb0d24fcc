//! Streams tensors into safetensors files, one file or shards with `model.safetensors.index.json`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::checkpoint::{INDEX_FILE, SINGLE_FILE};
use crate::error::CheckpointError;
use crate::manifest::{Manifest, TensorSpec};
use crate::progress;

/// Groups `specs` into shards of at most `shard_bytes` each (a tensor larger than that gets its own shard).
fn plan_shards(specs: &[TensorSpec], shard_bytes: u64) -> Vec<Vec<&TensorSpec>> {
    let mut shards: Vec<Vec<&TensorSpec>> = vec![Vec::new()];
    let mut used = 0u64;
    for spec in specs {
        let size = spec.num_bytes() as u64;
        let current = shards.last_mut().expect("at least one shard");
        if !current.is_empty() && used + size > shard_bytes {
            shards.push(Vec::new());
            used = 0;
        }
        shards.last_mut().expect("at least one shard").push(spec);
        used += size;
    }
    shards
}

/// The header bytes (length prefix, JSON, space padding) for `specs` laid out back to back.
fn header_bytes(specs: &[&TensorSpec]) -> Vec<u8> {
    let mut map = Map::new();
    map.insert("__metadata__".into(), json!({ "format": "pt" }));
    let mut offset = 0usize;
    for spec in specs {
        let end = offset + spec.num_bytes();
        map.insert(
            spec.name.clone(),
            json!({ "dtype": spec.dtype.name(), "shape": spec.shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let mut text = serde_json::to_vec(&Value::Object(map)).expect("header serialises");
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out
}

/// Writes every tensor of `manifest` into `dir`; `fill` returns a tensor's bytes and any `.scale` companion.
pub fn write_tensors(
    dir: &Path,
    manifest: &Manifest,
    shard_bytes: u64,
    fill: impl Fn(&TensorSpec) -> (Vec<u8>, Option<Vec<u8>>),
) -> Result<Vec<PathBuf>, CheckpointError> {
    let shards = plan_shards(&manifest.specs, shard_bytes);
    let names: Vec<String> = if shards.len() == 1 {
        vec![SINGLE_FILE.to_string()]
    } else {
        (1..=shards.len())
            .map(|i| format!("model-{i:05}-of-{:05}.safetensors", shards.len()))
            .collect()
    };
    let bar = progress::bytes(manifest.num_bytes(), "writing tensors");
    let mut pending: HashMap<String, Vec<u8>> = HashMap::new();
    let mut weight_map = Map::new();
    let mut paths = Vec::new();
    for (specs, name) in shards.iter().zip(&names) {
        let path = dir.join(name);
        let file = File::create(&path).map_err(|e| CheckpointError::io(&path, e))?;
        let mut out = BufWriter::with_capacity(1 << 22, file);
        let io = |e| CheckpointError::io(&path, e);
        out.write_all(&header_bytes(specs)).map_err(io)?;
        for spec in specs {
            let bytes = match pending.remove(&spec.name) {
                Some(bytes) => bytes,
                None => {
                    let (bytes, scale) = fill(spec);
                    if let Some(scale) = scale {
                        let stem = spec.name.strip_suffix(".weight").unwrap_or(&spec.name);
                        pending.insert(format!("{stem}.scale"), scale);
                    }
                    bytes
                }
            };
            assert_eq!(
                bytes.len(),
                spec.num_bytes(),
                "synth produced the wrong size for {}",
                spec.name
            );
            out.write_all(&bytes).map_err(io)?;
            weight_map.insert(spec.name.clone(), Value::String(name.clone()));
            bar.inc(bytes.len() as u64);
        }
        out.flush().map_err(io)?;
        paths.push(path);
    }
    bar.finish_and_clear();
    if names.len() > 1 {
        let index = json!({ "metadata": { "total_size": manifest.num_bytes() }, "weight_map": weight_map });
        let path = dir.join(INDEX_FILE);
        write_json(&path, &index)?;
        paths.push(path);
    }
    Ok(paths)
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json(path: &Path, value: &Value) -> Result<(), CheckpointError> {
    let text = serde_json::to_string_pretty(value).expect("JSON serialises") + "\n";
    std::fs::write(path, text).map_err(|e| CheckpointError::io(path, e))
}
