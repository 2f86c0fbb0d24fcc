// bf16_gemm: y = x . W^T on CUDA cores; 64x64 output tiles, K in fixed 32-wide chunks (FMA chain per chunk, then one add), so a row's bits never depend on M or the tile.
#define TM 64
#define TN 64
#define TK 32

extern "C" __global__ void __launch_bounds__(256) bf16_gemm(const float* x, const u16* w, float* y, int m, int n, int k) {
    __shared__ float xs[TM][TK + 1];
    __shared__ float ws[TN][TK + 1];
    int tiles_n = (n + TN - 1) / TN;
    int tiles = tiles_n * ((m + TM - 1) / TM);
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int kend = k;
#ifdef TF_FAULT_drop_tail
    kend = k - 1;
#endif
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0 = (t / tiles_n) * TM, n0 = (t % tiles_n) * TN;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
        for (int k0 = 0; k0 < kend; k0 += TK) {
            for (int i = threadIdx.x; i < TM * TK; i += 256) {
                int r = i / TK, c = i % TK, gm = m0 + r, gk = k0 + c;
                xs[r][c] = (gm < m && gk < kend) ? x[(size_t)gm * k + gk] : 0.0f;
            }
            for (int i = threadIdx.x; i < TN * TK; i += 256) {
                int r = i / TK, c = i % TK, gn = n0 + r, gk = k0 + c;
                ws[r][c] = (gn < n && gk < kend) ? tf_bf16_to_f32(w[(size_t)gn * k + gk]) : 0.0f;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            float part[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) part[i][j] = 0.0f;
            int kn = min(TK, kend - k0);
            for (int kk = 0; kk < kn; ++kk) {
                float a[4], b[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) a[i] = xs[ty + 16 * i][kk];
#pragma unroll
                for (int j = 0; j < 4; ++j) b[j] = ws[tx + 16 * j][kk];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) part[i][j] = fmaf(a[i], b[j], part[i][j]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += part[i][j];
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int gm = m0 + ty + 16 * i;
            bool skip = gm >= m;
#ifdef TF_FAULT_skip_last_row
            skip = skip || gm == m - 1;
#endif
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                int gn = n0 + tx + 16 * j;
                if (!skip && gn < n) y[(size_t)gm * n + gn] = acc[i][j];
            }
        }
    }
}
