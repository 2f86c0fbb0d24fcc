// fp8_gemm: y = act_quant(x) . W^T with e4m3 weights and 128x128 e8m0 scales, on CUDA cores; K in fixed 128-blocks (an FMA chain per block, then one scaled add), so a row's bits never depend on M or the tile.
#define MAX_ROW 8192
#define QB 128
#define TM 64
#define TN 64
#define TK 32

// Per row: the e4m3 grid values q = round(x / s) and one power-of-two scale s per 128 values (DeepSeek's act_quant).
__device__ __forceinline__ void tf_fp8_quant_rows(const float* x, float* q, float* q_scale, int rows, int k) {
    __shared__ float xs[MAX_ROW];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int nblk = (k + QB - 1) / QB;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int i = threadIdx.x; i < k; i += blockDim.x) xs[i] = x[(size_t)r * k + i];
        __syncthreads();
        for (int b = warp; b < nblk; b += warps) {
            int lo = b * QB, hi = min(lo + QB, k);
            float m = 0.0f;
            for (int i = lo + lane; i < hi; i += 32) m = fmaxf(m, fabsf(xs[i]));
            for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            float s = tf_pow2_scale(m, 1e-4f, 448.0f);
            for (int i = lo + lane; i < hi; i += 32)
                q[(size_t)r * k + i] = tf_round_grid(fminf(fmaxf(xs[i] / s, -448.0f), 448.0f), 1.0f / 64.0f, 24576.0f, 20);
            if (lane == 0) q_scale[(size_t)r * nblk + b] = s;
        }
        __syncthreads();
    }
}

// Tiles of y[:, 0..n] (row stride y_stride) from quantised rows q (row stride q_stride, scales row stride qs_stride) and weight
// rows w[0..n] whose scale rows start at weight row col0 of a grid nblk wide.
__device__ __forceinline__ void tf_fp8_tiles(const float* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                             const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    __shared__ float xs[TM][TK + 1];
    __shared__ float ws[TN][TK + 1];
    int tiles_n = (n + TN - 1) / TN;
    int tiles = tiles_n * ((m + TM - 1) / TM);
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int nblk = (k + QB - 1) / QB;
    int kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * QB;
#endif
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0 = (t / tiles_n) * TM, n0 = (t % tiles_n) * TN;
        float acc[4][4], part[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
        for (int k0 = 0; k0 < kend; k0 += TK) {
            if (k0 % QB == 0) {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) part[i][j] = 0.0f;
            }
            for (int i = threadIdx.x; i < TM * TK; i += 256) {
                int r = i / TK, c = i % TK, gm = m0 + r, gk = k0 + c;
                xs[r][c] = (gm < m && gk < kend) ? q[(size_t)gm * q_stride + gk] : 0.0f;
            }
            for (int i = threadIdx.x; i < TN * TK; i += 256) {
                int r = i / TK, c = i % TK, gn = n0 + r, gk = k0 + c;
                ws[r][c] = (gn < n && gk < kend) ? tf_e4m3_to_f32(w[(size_t)gn * k + gk]) : 0.0f;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
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
            if ((k0 + TK) % QB == 0 || k0 + TK >= kend) {
                int kb = k0 / QB;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    int gm = min(m0 + ty + 16 * i, m - 1);
                    float sa = q_scale[(size_t)gm * qs_stride + kb];
#ifdef TF_FAULT_lost_act_scale
                    sa = 1.0f;
#endif
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        int gn = min(n0 + tx + 16 * j, n - 1);
                        float sw = tf_e8m0_to_f32(w_scale[(size_t)((col0 + gn) / QB) * nblk + kb]);
                        acc[i][j] += part[i][j] * (sa * sw);
                    }
                }
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int gm = m0 + ty + 16 * i;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                int gn = n0 + tx + 16 * j;
                bool skip = gm >= m || gn >= n;
#ifdef TF_FAULT_skip_last_column
                skip = skip || gn == n - 1;
#endif
                if (!skip) y[(size_t)gm * y_stride + gn] = acc[i][j];
            }
        }
    }
}

extern "C" __global__ void fp8_gemm_quant(const float* x, float* q, float* q_scale, int rows, int k) {
    tf_fp8_quant_rows(x, q, q_scale, rows, k);
}

extern "C" __global__ void __launch_bounds__(256) fp8_gemm(const float* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                          float* y, int m, int n, int k) {
    tf_fp8_tiles(q, k, q_scale, (k + QB - 1) / QB, w, w_scale, 0, y, n, m, n, k);
}
