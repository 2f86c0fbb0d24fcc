// fp8_gemm: y = act_quant(x) . W^T with e4m3 weights and 128x128 e8m0 scales on tensor cores; K in fixed 128-blocks (an MMA chain per block, then one scaled add), so a row's bits never depend on M or the tile.
#define QB 128

// Per row: the e4m3 grid values q = round(x / s) as f16 (row stride k rounded up to 8) and one power-of-two scale s per 128 values (DeepSeek's act_quant), one warp per (row, 128-block).
__device__ __forceinline__ void tf_fp8_quant_rows(const float* x, u16* q, float* q_scale, int rows, int k) {
    int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int nblk = (k + QB - 1) / QB, kp = (k + 7) / 8 * 8;
    for (long t = (long)blockIdx.x * warps + threadIdx.x / 32; t < (long)rows * nblk; t += (long)gridDim.x * warps) {
        int r = (int)(t / nblk), b = (int)(t % nblk);
        tf_fp8_quant_block(x + (size_t)r * k, q + (size_t)r * kp, q_scale + (size_t)r * nblk + b, b * QB, min(b * QB + QB, k), lane);
    }
}

// Tiles of y[:, 0..n] (row stride y_stride) from f16 quantised rows q (row stride q_stride, scales row stride qs_stride) and weight
// rows w[0..n] whose scale rows start at weight row col0 of a grid nblk wide; on tensor cores (cuda/mma_pipe.cuh).
__device__ __forceinline__ void tf_fp8_tiles(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                             const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    tf_mma_pipe<MMA_FP8>(q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
}

extern "C" __global__ void fp8_gemm_quant(const float* x, u16* q, float* q_scale, int rows, int k) {
    tf_grid_begin();
    tf_fp8_quant_rows(x, q, q_scale, rows, k);
}

extern "C" __global__ void __launch_bounds__(TF_PIPE_THREADS, 1) fp8_gemm(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                          float* y, int m, int n, int k) {
    tf_grid_begin();
    tf_fp8_tiles(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Up to 16 rows (decode): the same bits as fp8_gemm, with narrow tiles so more blocks stream the weights.
extern "C" __global__ void __launch_bounds__(256, 2) fp8_gemm_rows(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                               float* y, int m, int n, int k) {
    tf_grid_begin();
    tf_mma_rows_m<MMA_FP8>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Up to 8 rows (decode): fp8_gemm_rows' shared-ring path alone, three blocks an SM, its first weight copies before the grid wait (weights are never written).
extern "C" __global__ void __launch_bounds__(256, 3) fp8_gemm_rows8(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                                float* y, int m, int n, int k) {
    tf_grid_open();
    tf_mma_rows_8<MMA_FP8, true>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Up to 8 rows (decode) with long K: fp8_gemm_rows' register-prefetch path alone, two blocks an SM, its first weight loads before the grid wait.
extern "C" __global__ void __launch_bounds__(256, 2) fp8_gemm_rows_long(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                                    float* y, int m, int n, int k) {
    tf_grid_open();
    tf_mma_rows_reg8<MMA_FP8, true>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}
