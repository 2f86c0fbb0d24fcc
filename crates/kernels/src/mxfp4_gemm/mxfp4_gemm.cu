// mxfp4_gemm: y = act_quant(x) . W^T with MXFP4 weights (e2m1 [n, k/2], low nibble first; e8m0 [n, k/32]) on tensor cores; K in fixed 32-blocks (two MMAs, then one scaled add), so a row's bits never depend on M or the tile.
extern "C" __global__ void mxfp4_gemm_quant(const float* x, u16* q, float* q_scale, int rows, int k) {
    tf_fp8_quant_rows(x, q, q_scale, rows, k);
}

extern "C" __global__ void __launch_bounds__(256, 1) mxfp4_gemm(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                            float* y, int m, int n, int k) {
    tf_mma_pipe<MMA_FP4>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Up to 16 rows (decode): the same bits as mxfp4_gemm, with narrow tiles so more blocks stream the weights.
extern "C" __global__ void __launch_bounds__(256, 2) mxfp4_gemm_rows(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                                 float* y, int m, int n, int k) {
    tf_mma_rows_m<MMA_FP4>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Up to 8 rows (decode): mxfp4_gemm_rows' shared-ring path alone, three blocks an SM.
extern "C" __global__ void __launch_bounds__(256, 3) mxfp4_gemm_rows8(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                                  float* y, int m, int n, int k) {
    tf_mma_rows_8<MMA_FP4>(q, (k + 7) / 8 * 8, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}

// Routed slots (decode): block (x, s, z) runs slot s's expert e = idx[s] (weights tables[z][2e], scales tables[z][2e + 1]) on quantised row s / per_row into row s of ys[z]; the same bits as mxfp4_gemm_rows8 (three blocks an SM); an id outside 0..experts gives a zero row.
extern "C" __global__ void __launch_bounds__(256, 3) mxfp4_gemm_slots(const u16* q, const float* q_scale, const u64* table0, const u64* table1,
                                                                  const int* idx, int per_row, float* y0, float* y1, int n, int k,
                                                                  int experts) {
    int s = blockIdx.y, e = idx[s], row = s / per_row;
    const u64* table = blockIdx.z ? table1 : table0;
    float* y = blockIdx.z ? y1 : y0;
    if (e < 0 || e >= experts) {
        for (int t = blockIdx.x; t < (n + ROWS_BN - 1) / ROWS_BN; t += gridDim.x)
            if (threadIdx.x < ROWS_BN && t * ROWS_BN + threadIdx.x < n) y[(size_t)s * n + t * ROWS_BN + threadIdx.x] = 0.0f;
        return;
    }
    int q_stride = (k + 7) / 8 * 8, qs_stride = (k + QB - 1) / QB;
    const u8* w = (const u8*)table[2 * e];
    const u8* w_scale = (const u8*)table[2 * e + 1];
    tf_mma_rows_8<MMA_FP4, 1>(q + (size_t)row * q_stride, q_stride, q_scale + (size_t)row * qs_stride, qs_stride, w, w_scale, 0,
                           y + (size_t)s * n, n, 1, n, k);
}
