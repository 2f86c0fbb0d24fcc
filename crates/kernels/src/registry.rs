//! Every registered kernel, one line each.

use crate::contract::Kernel;

/// All kernels the contract checks.
pub fn all() -> Vec<&'static dyn Kernel> {
    vec![&crate::rms_norm::RmsNorm]
}
