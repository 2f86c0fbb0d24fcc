//! A safetensors checkpoint, one file or sharded through `model.safetensors.index.json`, memory-mapped.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::dtype::DType;
use crate::error::CheckpointError;
use crate::header::{self, HeaderEntry};
use crate::progress;

/// The single-file checkpoint name.
pub const SINGLE_FILE: &str = "model.safetensors";
/// The shard index name.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// Where one tensor lives.
#[derive(Clone, Debug)]
pub struct TensorEntry {
    pub dtype: DType,
    pub shape: Vec<usize>,
    shard_idx: usize,
    bytes: std::ops::Range<usize>,
}

impl TensorEntry {
    /// Where the tensor's bytes lie in its file.
    pub fn file_bytes(&self) -> std::ops::Range<usize> {
        self.bytes.clone()
    }
}

/// A borrowed view of one tensor's bytes.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub bytes: &'a [u8],
}

struct Shard {
    path: PathBuf,
    map: Arc<Mmap>,
}

/// One tensor's bytes in a shared mapping: lives as long as any holder, independent of the `Checkpoint`.
#[derive(Clone)]
pub struct MappedBytes {
    map: Arc<Mmap>,
    range: std::ops::Range<usize>,
}

impl std::ops::Deref for MappedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

impl MappedBytes {
    /// An empty view into the same mapping: what a rank holds of a tensor it does not own.
    pub fn emptied(&self) -> MappedBytes {
        MappedBytes {
            map: Arc::clone(&self.map),
            range: self.range.start..self.range.start,
        }
    }
}

impl std::fmt::Debug for MappedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedBytes({} bytes)", self.range.len())
    }
}

/// An opened checkpoint: every shard mapped and every header checked.
pub struct Checkpoint {
    dir: PathBuf,
    shards: Vec<Shard>,
    tensors: BTreeMap<String, TensorEntry>,
}

impl Checkpoint {
    /// Opens `dir/model.safetensors` or the shards listed in `dir/model.safetensors.index.json`.
    pub fn open(dir: &Path) -> Result<Checkpoint, CheckpointError> {
        let index_path = dir.join(INDEX_FILE);
        let single_path = dir.join(SINGLE_FILE);
        if index_path.exists() {
            Self::open_sharded(dir, &index_path)
        } else if single_path.exists() {
            let mut ckpt = Checkpoint {
                dir: dir.to_path_buf(),
                shards: Vec::new(),
                tensors: BTreeMap::new(),
            };
            let entries = ckpt.map_shard(&single_path)?;
            for e in entries {
                ckpt.insert(0, e)?;
            }
            Ok(ckpt)
        } else {
            Err(CheckpointError::Index {
                path: dir.to_path_buf(),
                reason: format!(
                    "holds neither {SINGLE_FILE} nor {INDEX_FILE}; point --model at a checkpoint folder (tensorfold synth writes one)"
                ),
            })
        }
    }

    fn open_sharded(dir: &Path, index_path: &Path) -> Result<Checkpoint, CheckpointError> {
        let text = std::fs::read_to_string(index_path).map_err(|e| CheckpointError::io(index_path, e))?;
        let bad = |reason: String| CheckpointError::Index {
            path: index_path.to_path_buf(),
            reason,
        };
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let weight_map = json["weight_map"]
            .as_object()
            .ok_or_else(|| bad("has no `weight_map` object".into()))?;
        let mut listed: BTreeMap<String, String> = BTreeMap::new();
        for (name, file) in weight_map {
            let file = file
                .as_str()
                .ok_or_else(|| bad(format!("weight_map entry `{name}` is not a file name")))?;
            listed.insert(name.clone(), file.to_string());
        }
        let files: BTreeSet<&String> = listed.values().collect();
        let mut ckpt = Checkpoint {
            dir: dir.to_path_buf(),
            shards: Vec::new(),
            tensors: BTreeMap::new(),
        };
        let bar = progress::items(files.len() as u64, "opening shards");
        for file in files {
            let path = dir.join(file);
            let shard_idx = ckpt.shards.len();
            for e in ckpt.map_shard(&path)? {
                match listed.get(&e.name) {
                    Some(f) if f == file => ckpt.insert(shard_idx, e)?,
                    Some(f) => {
                        return Err(bad(format!(
                            "lists tensor `{}` in {f} but it is stored in {file}",
                            e.name
                        )));
                    }
                    None => {
                        return Err(bad(format!("does not list tensor `{}` that {file} holds", e.name)));
                    }
                }
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        if let Some((name, file)) = listed.iter().find(|(name, _)| !ckpt.tensors.contains_key(*name)) {
            return Err(bad(format!(
                "lists tensor `{name}` in {file} but {file} does not hold it; the shard is incomplete"
            )));
        }
        Ok(ckpt)
    }

    fn map_shard(&mut self, path: &Path) -> Result<Vec<HeaderEntry>, CheckpointError> {
        let file = File::open(path).map_err(|e| CheckpointError::io(path, e))?;
        // SAFETY: the file is opened read-only and the engine never writes through this mapping.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| CheckpointError::io(path, e))?;
        // Weights are read whole, over and over: 2 MB pages where the kernel offers them (only a hint, so a refusal is fine).
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let entries = header::parse(path, &map)?;
        self.shards.push(Shard {
            path: path.to_path_buf(),
            map: Arc::new(map),
        });
        Ok(entries)
    }

    fn insert(&mut self, shard_idx: usize, e: HeaderEntry) -> Result<(), CheckpointError> {
        if let Some(prev) = self.tensors.get(&e.name) {
            return Err(CheckpointError::Tensor {
                path: self.shards[shard_idx].path.clone(),
                name: e.name,
                reason: format!("also stored in {}", self.shards[prev.shard_idx].path.display()),
            });
        }
        let entry = TensorEntry {
            dtype: e.dtype,
            shape: e.shape,
            shard_idx,
            bytes: e.bytes,
        };
        self.tensors.insert(e.name, entry);
        Ok(())
    }

    /// The checkpoint folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every tensor, by name.
    pub fn tensors(&self) -> &BTreeMap<String, TensorEntry> {
        &self.tensors
    }

    /// The file that holds tensor `entry`.
    pub fn file_of(&self, entry: &TensorEntry) -> &Path {
        &self.shards[entry.shard_idx].path
    }

    /// The file names of all shards.
    pub fn files(&self) -> Vec<&Path> {
        self.shards.iter().map(|s| s.path.as_path()).collect()
    }

    /// One tensor's bytes, or `None` when the checkpoint has no tensor of that name.
    pub fn get(&self, name: &str) -> Option<TensorView<'_>> {
        let e = self.tensors.get(name)?;
        Some(TensorView {
            dtype: e.dtype,
            shape: &e.shape,
            bytes: &self.shards[e.shard_idx].map[e.bytes.clone()],
        })
    }

    /// One tensor's bytes as a shared handle that outlives this `Checkpoint`.
    pub fn mapped(&self, name: &str) -> Option<MappedBytes> {
        let e = self.tensors.get(name)?;
        Some(MappedBytes {
            map: Arc::clone(&self.shards[e.shard_idx].map),
            range: e.bytes.clone(),
        })
    }

    /// Total tensor bytes.
    pub fn total_bytes(&self) -> u64 {
        self.tensors.values().map(|e| e.bytes.len() as u64).sum()
    }

    /// Reads every mapped page once so that later reads do not fault, with a progress bar; returns a checksum.
    pub fn prefault(&self) -> u64 {
        let bar = progress::bytes(self.total_bytes(), "loading weights");
        let mut sum = 0u64;
        for e in self.tensors.values() {
            let bytes = &self.shards[e.shard_idx].map[e.bytes.clone()];
            for chunk in bytes.chunks(1 << 20) {
                sum = chunk
                    .iter()
                    .step_by(4096)
                    .fold(sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64));
                bar.inc(chunk.len() as u64);
            }
        }
        bar.finish_and_clear();
        sum
    }
}
