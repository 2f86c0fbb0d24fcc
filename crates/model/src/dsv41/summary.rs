//! Parameter counts and bytes by format of a DeepSeek V4.1 model, from its config.

use std::collections::BTreeMap;

use crate::config::dsv41::Dsv41TextConfig;
use crate::dtype::DType;
use crate::manifest::TensorSpec;

/// Sizes of one model.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Parameters of the main model without Engram tables (embedding and head included, DSpark excluded).
    pub total_params: u64,
    /// Parameters one token touches in the main model: all but the unselected routed experts and Engram rows.
    pub active_params: u64,
    /// Parameters of the DSpark stages.
    pub dspark_params: u64,
    /// Rows times columns of the Engram tables (a token reads 24 rows per Engram layer).
    pub engram_params: u64,
    /// Checkpoint bytes by dtype.
    pub bytes_by_dtype: BTreeMap<DType, u64>,
    /// Checkpoint bytes of the Engram tables and their scales.
    pub engram_bytes: u64,
}

/// Logical parameters held by a tensor: packed FP4 counts two per byte; scales count none.
fn params_of(spec: &TensorSpec) -> u64 {
    if spec.name.ends_with(".scale") {
        0
    } else if spec.dtype == DType::I8 {
        2 * spec.numel() as u64
    } else {
        spec.numel() as u64
    }
}

impl Summary {
    /// Counts parameters and bytes over the manifest of `c`.
    pub fn of(c: &Dsv41TextConfig) -> Summary {
        let mut s = Summary::default();
        let mut routed = 0u64;
        for spec in super::manifest(c).specs {
            *s.bytes_by_dtype.entry(spec.dtype).or_default() += spec.num_bytes() as u64;
            let params = params_of(&spec);
            if spec.name.contains(".engram.embed.") {
                s.engram_bytes += spec.num_bytes() as u64;
                s.engram_params += params;
            } else if spec.name.starts_with("mtp.") {
                s.dspark_params += params;
            } else {
                s.total_params += params;
                if spec.name.contains(".ffn.experts.") {
                    routed += params;
                }
            }
        }
        let active_routed = routed * c.num_experts_per_tok as u64 / c.n_routed_experts as u64;
        s.active_params = s.total_params - routed + active_routed;
        s
    }

    /// Checkpoint bytes in all.
    pub fn total_bytes(&self) -> u64 {
        self.bytes_by_dtype.values().sum()
    }
}
