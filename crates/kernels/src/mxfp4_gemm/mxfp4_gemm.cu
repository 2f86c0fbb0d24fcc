// mxfp4_gemm: y = act_quant(x) . W^T with MXFP4 weights (e2m1 [n, k/2], low nibble first; e8m0 [n, k/32]) on tensor cores; K in fixed 128-blocks (each 32-block's scale folded into the f16 weights against the block's largest, eight MMAs, then one scaled add by that largest), so a row's bits never depend on M or the tile.
extern "C" __global__ void mxfp4_gemm_quant(const float* x, u16* q, float* q_scale, int rows, int k) {
    tf_grid_begin();
    tf_fp8_quant_rows(x, q, q_scale, rows, k);
}

extern "C" __global__ void __launch_bounds__(TF_PIPE_THREADS, 1) mxfp4_gemm(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                            float* y, int m, int n, int k) {
    tf_grid_begin();
    tf_mma_pipe<MMA_FP4>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Routed experts' prompt rows: row group i (mt[3 i], mt[3 i + 1], mt[3 i + 2]: expert, first row, rows, at most 64) of q against its expert's matrix in table (entry 2e the weights, 2e + 1 the scales), into the same rows of y; mxfp4_gemm's bits on each group's rows.
extern "C" __global__ void __launch_bounds__(TF_PIPE_THREADS, 1) mxfp4_gemm_grouped(const u16* q, const float* q_scale, const u64* table, const int* mt,
                                                                    int groups, float* y, int n, int k) {
    tf_grid_begin();
    tf_mma_pipe_tiles<MMA_FP4>(TfTiles{q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, nullptr, nullptr, 0, y, n, 0, n, k, table, mt, groups});
}

// Up to 16 rows (decode): the same bits as mxfp4_gemm, with narrow tiles so more blocks stream the weights.
extern "C" __global__ void __launch_bounds__(256, 2) mxfp4_gemm_rows(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                                 float* y, int m, int n, int k) {
    tf_grid_begin();
    tf_mma_rows_m<MMA_FP4>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Up to 8 rows (decode): mxfp4_gemm_rows' shared-ring path alone, three blocks an SM.
extern "C" __global__ void __launch_bounds__(256, 3) mxfp4_gemm_rows8(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                                  float* y, int m, int n, int k) {
    tf_grid_begin();
    tf_mma_rows_8<MMA_FP4>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}
