//! Dynamic shared memory of the sm_90a prompt GEMM entries (wg_pipe.cuh's deep ring): opted in at load, passed at launch, checked by the limits.

/// Stages of the deep ring (wg_pipe.cuh's `WG_RING`).
pub const WG_RING: u32 = 3;

/// 32-wide sub-stages a stage (wg_pipe.cuh's `WG_SUB`).
pub const WG_SUB: u32 = 4;

/// The entries whose tiles are `tf_mma_pipe`'s.
pub const PIPE_ENTRIES: [&str; 3] = ["fp8_gemm", "mxfp4_gemm", "grouped_proj"];

/// Bytes of one f16 stage of 128 rows by 32 values.
const STAGE: u32 = 128 * 32 * 2;

/// Bytes of dynamic shared memory `entry` takes on `arch`: on sm_90a the larger of `TfWgSmem` and `TfPipeSmem`, elsewhere none.
pub fn shared_bytes(entry: &str, arch: u32) -> u32 {
    if arch != 90 || !PIPE_ENTRIES.contains(&entry) {
        return 0;
    }
    let scales = 2 * 128 * 4;
    let ring = WG_SUB * (WG_RING * (STAGE + 128 * 32) + 2 * STAGE + scales);
    let old = 3 * STAGE + 2 * STAGE + scales;
    ring.max(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_prompt_tiles_on_sm_90a_take_dynamic_shared_memory() {
        assert_eq!(shared_bytes("fp8_gemm", 90), 4 * (3 * 12_288 + 17_408));
        assert_eq!(shared_bytes("fp8_gemm", 80), 0);
        assert_eq!(shared_bytes("fp8_gemm_rows", 90), 0);
        assert!(PIPE_ENTRIES.iter().all(|e| shared_bytes(e, 90) <= 227 * 1024));
    }
}
