//! A family's expected tensors (name, dtype, shape) and the check of a checkpoint against them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::checkpoint::Checkpoint;
use crate::dtype::DType;
use crate::error::CheckpointError;

/// One expected tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorSpec {
    pub fn new(name: impl Into<String>, dtype: DType, shape: &[usize]) -> Self {
        TensorSpec {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes on disk.
    pub fn num_bytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
}

/// The full list of tensors a family expects for one config, in a fixed order.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    pub family: &'static str,
    pub specs: Vec<TensorSpec>,
}

/// One way a checkpoint differs from its manifest.
#[derive(Clone, Debug)]
pub enum Problem {
    Missing {
        spec: TensorSpec,
        dir: PathBuf,
    },
    Extra {
        name: String,
        file: PathBuf,
        dtype: DType,
        shape: Vec<usize>,
    },
    Shape {
        name: String,
        file: PathBuf,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    DType {
        name: String,
        file: PathBuf,
        expected: DType,
        found: DType,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing { spec, dir } => write!(
                f,
                "tensor `{}` is missing: expected {} {:?}, found no such tensor in any file of {}",
                spec.name,
                spec.dtype,
                spec.shape,
                dir.display()
            ),
            Problem::Extra {
                name,
                file,
                dtype,
                shape,
            } => write!(
                f,
                "tensor `{name}` in {} is not part of the model: expected no such tensor, found {dtype} {shape:?}",
                file.display()
            ),
            Problem::Shape {
                name,
                file,
                expected,
                found,
            } => write!(
                f,
                "tensor `{name}` in {} has the wrong shape: expected {expected:?}, found {found:?}",
                file.display()
            ),
            Problem::DType {
                name,
                file,
                expected,
                found,
            } => write!(
                f,
                "tensor `{name}` in {} has the wrong dtype: expected {expected}, found {found}",
                file.display()
            ),
        }
    }
}

impl Manifest {
    /// Total bytes of all expected tensors.
    pub fn num_bytes(&self) -> u64 {
        self.specs.iter().map(|s| s.num_bytes() as u64).sum()
    }

    /// Lists every difference between `ckpt` and this manifest.
    pub fn problems(&self, ckpt: &Checkpoint) -> Vec<Problem> {
        let mut problems = Vec::new();
        let expected: BTreeMap<&str, &TensorSpec> = self.specs.iter().map(|s| (s.name.as_str(), s)).collect();
        for spec in &self.specs {
            let Some(entry) = ckpt.tensors().get(&spec.name) else {
                problems.push(Problem::Missing {
                    spec: spec.clone(),
                    dir: ckpt.dir().to_path_buf(),
                });
                continue;
            };
            let file = ckpt.file_of(entry).to_path_buf();
            if entry.dtype != spec.dtype {
                problems.push(Problem::DType {
                    name: spec.name.clone(),
                    file: file.clone(),
                    expected: spec.dtype,
                    found: entry.dtype,
                });
            }
            if entry.shape != spec.shape {
                problems.push(Problem::Shape {
                    name: spec.name.clone(),
                    file,
                    expected: spec.shape.clone(),
                    found: entry.shape.clone(),
                });
            }
        }
        for (name, entry) in ckpt.tensors() {
            if !expected.contains_key(name.as_str()) {
                problems.push(Problem::Extra {
                    name: name.clone(),
                    file: ckpt.file_of(entry).to_path_buf(),
                    dtype: entry.dtype,
                    shape: entry.shape.clone(),
                });
            }
        }
        problems
    }

    /// Fails with every problem listed when `ckpt` does not match this manifest.
    pub fn check(&self, ckpt: &Checkpoint) -> Result<(), CheckpointError> {
        let problems = self.problems(ckpt);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CheckpointError::Manifest {
                dir: ckpt.dir().to_path_buf(),
                family: self.family,
                problems,
            })
        }
    }
}
