//! `config.json` parsing: typed configs per family, errors that name the field and the file.

pub mod dsv4;
pub mod dsv41;

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::CheckpointError;

/// The config file name inside a checkpoint folder.
pub const CONFIG_FILE: &str = "config.json";

/// Parses `text` (the contents of `path`) as `T`, naming the offending field on failure.
pub fn parse_json<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, CheckpointError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        let message = inner.to_string();
        let field = match (field.as_str(), missing_field(&message)) {
            (".", Some(name)) => name,
            (_, Some(name)) => format!("{field}.{name}"),
            (".", None) => "(top level)".to_string(),
            _ => field,
        };
        CheckpointError::Config {
            path: path.to_path_buf(),
            field,
            reason: message,
        }
    })
}

fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_string())
}

/// Reads `dir/config.json` as `T`.
pub fn read<T: DeserializeOwned>(dir: &Path) -> Result<T, CheckpointError> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| CheckpointError::io(&path, e))?;
    parse_json(&path, &text)
}

/// The `model_type` of `dir/config.json`, to pick a family before full parsing.
pub fn model_type(dir: &Path) -> Result<String, CheckpointError> {
    #[derive(serde::Deserialize)]
    struct Probe {
        model_type: String,
    }
    Ok(read::<Probe>(dir)?.model_type)
}
