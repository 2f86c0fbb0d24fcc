//! Parses and checks a safetensors header against the bytes that follow it.

use std::ops::Range;
use std::path::Path;

use serde_json::Value;

use crate::dtype::DType;
use crate::error::CheckpointError;

/// Largest header accepted, as in the reference safetensors reader.
const MAX_HEADER_BYTES: usize = 100_000_000;

/// One tensor's entry in a safetensors header, with its absolute byte range in the file.
#[derive(Clone, Debug)]
pub struct HeaderEntry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Range<usize>,
}

/// Reads the header of `buf` (a whole safetensors file at `path`) and checks every tensor's extent.
pub fn parse(path: &Path, buf: &[u8]) -> Result<Vec<HeaderEntry>, CheckpointError> {
    let bad = |reason: String| CheckpointError::Header {
        path: path.to_path_buf(),
        reason,
    };
    let len_bytes: [u8; 8] = buf.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(|| {
        bad(format!(
            "file is {} bytes, shorter than the 8-byte header length",
            buf.len()
        ))
    })?;
    let header_len = u64::from_le_bytes(len_bytes) as usize;
    if header_len > MAX_HEADER_BYTES {
        return Err(bad(format!(
            "header length {header_len} exceeds {MAX_HEADER_BYTES} bytes"
        )));
    }
    let data_start = 8 + header_len;
    let header = buf.get(8..data_start).ok_or_else(|| {
        bad(format!(
            "header claims {header_len} bytes but the file holds {}; the file is truncated",
            buf.len()
        ))
    })?;
    let json: Value = serde_json::from_slice(header).map_err(|e| bad(format!("header JSON: {e}")))?;
    let Value::Object(map) = json else {
        return Err(bad("header is not a JSON object".into()));
    };
    let data_len = buf.len() - data_start;
    let mut entries = Vec::with_capacity(map.len());
    for (name, value) in map {
        if name == "__metadata__" {
            continue;
        }
        entries.push(parse_entry(path, &name, &value, data_start, data_len)?);
    }
    entries.sort_by_key(|e| e.bytes.start);
    Ok(entries)
}

fn parse_entry(
    path: &Path,
    name: &str,
    value: &Value,
    data_start: usize,
    data_len: usize,
) -> Result<HeaderEntry, CheckpointError> {
    let bad = |reason: String| CheckpointError::Tensor {
        path: path.to_path_buf(),
        name: name.to_string(),
        reason,
    };
    let dtype_name = value["dtype"]
        .as_str()
        .ok_or_else(|| bad("header entry has no `dtype` string".into()))?;
    let dtype =
        DType::from_name(dtype_name).ok_or_else(|| bad(format!("dtype {dtype_name} is not one this engine reads")))?;
    let shape = value["shape"]
        .as_array()
        .and_then(|dims| {
            dims.iter()
                .map(|d| d.as_u64().map(|d| d as usize))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| bad("header entry has no `shape` list of non-negative integers".into()))?;
    let offsets = value["data_offsets"]
        .as_array()
        .and_then(|o| match o.as_slice() {
            [a, b] => Some((a.as_u64()? as usize, b.as_u64()? as usize)),
            _ => None,
        })
        .ok_or_else(|| bad("header entry has no `data_offsets` pair".into()))?;
    let (begin, end) = offsets;
    if end < begin {
        return Err(bad(format!("data_offsets [{begin}, {end}] run backwards")));
    }
    let expected = shape.iter().product::<usize>() * dtype.size();
    if end - begin != expected {
        return Err(bad(format!(
            "{dtype} {shape:?} needs {expected} bytes but data_offsets [{begin}, {end}] hold {}",
            end - begin
        )));
    }
    if end > data_len {
        return Err(bad(format!(
            "data ends at byte {} of the file but the file has only {} bytes; the file is truncated, copy or download it again",
            data_start + end,
            data_start + data_len
        )));
    }
    Ok(HeaderEntry {
        name: name.to_string(),
        dtype,
        shape,
        bytes: data_start + begin..data_start + end,
    })
}
