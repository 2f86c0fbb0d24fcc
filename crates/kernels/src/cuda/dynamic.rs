//! Dynamic shared memory and block size of the sm_90a prompt GEMM entries (wg_rs.cuh's register-operand ring and the warpgroup feeding it): opted in at load, passed at launch, checked by the limits.

/// Stages of the ring (wg_rs.cuh's `RS_RING`).
const RS_RING: u32 = 4;

/// The entries whose tiles are `tf_mma_pipe`'s.
pub const PIPE_ENTRIES: [&str; 4] = ["fp8_gemm", "mxfp4_gemm", "mxfp4_gemm_grouped", "grouped_proj"];

/// Bytes of one f16 stage of 128 rows by 32 values.
const STAGE: u32 = 128 * 32 * 2;

/// Bytes of dynamic shared memory `entry` takes on `arch`: on sm_90a the larger of `TfRsSmem` and `TfPipeSmem`, elsewhere none.
pub fn shared_bytes(entry: &str, arch: u32) -> u32 {
    if arch != 90 || !PIPE_ENTRIES.contains(&entry) {
        return 0;
    }
    // A ring stage: four activation sub-stages, 128 raw weight rows of 128 bytes, the activation scales (RS_SA floats) and its two barriers.
    let ring = RS_RING * (4 * STAGE + 128 * 128 + 4 * (128 / 4 + 4) * 4 + 2 * 8);
    let old = 3 * STAGE + 2 * STAGE + 2 * 128 * 4;
    ring.max(old)
}

/// Threads a block of `entry` runs on `arch` when its launch record asks for `block`: on sm_90a the prompt entries' two MMA warpgroups and the one feeding them (wg_rs.cuh's `TF_PIPE_THREADS`).
pub fn threads(entry: &str, arch: u32, block: u32) -> u32 {
    if one_block_an_sm(entry, arch) { 384 } else { block }
}

/// Whether `entry` on `arch` runs one block an SM that loops over the tiles (the sm_90a prompt entries), so a block's feeding warpgroup runs ahead into its next tile.
pub fn one_block_an_sm(entry: &str, arch: u32) -> bool {
    arch == 90 && PIPE_ENTRIES.contains(&entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_prompt_tiles_on_sm_90a_take_dynamic_shared_memory() {
        assert_eq!(shared_bytes("fp8_gemm", 90), 4 * (32_768 + 16_384 + 576 + 16));
        assert_eq!(shared_bytes("fp8_gemm", 80), 0);
        assert_eq!(shared_bytes("fp8_gemm_rows", 90), 0);
        assert!(PIPE_ENTRIES.iter().all(|e| shared_bytes(e, 90) <= 227 * 1024));
    }

    #[test]
    fn only_the_prompt_tiles_on_sm_90a_add_a_feeding_warpgroup() {
        assert_eq!(threads("mxfp4_gemm", 90, 256), 384);
        assert_eq!(threads("mxfp4_gemm", 89, 256), 256);
        assert_eq!(threads("mxfp4_gemm_rows", 90, 256), 256);
    }
}
