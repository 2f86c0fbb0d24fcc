// bf16_gemm: y = x . W^T on tensor cores; x split exactly into three bf16 pieces (hi, mid, lo), K in fixed 32-wide stages (six MMAs into a partial, then one add), so a row's bits never depend on M or the tile.
extern "C" __global__ void __launch_bounds__(256, 2) bf16_gemm(const float* x, const u16* w, float* y, int m, int n, int k) {
    tf_bf16_tiles(x, w, y, m, n, k);
}

// Two bf16 weights of column n at k, k + 1 (zeros past kend), packed as the MMA's B pair.
__device__ __forceinline__ u32 tf_bf16_pair(const u16* w16, int n, int k, int kk, int kend, bool wvec) {
    const u16* p = w16 + (size_t)n * k + kk;
    if (wvec && kk + 1 < kend) return __ldg((const u32*)p);
    u32 lo = kk < kend ? (u32)__ldg(p) : 0u;
    u32 hi = kk + 1 < kend ? (u32)__ldg(p + 1) : 0u;
    return lo | (hi << 16);
}

// One 32-wide stage's partial of 16 columns from n0 for up to 16 rows, as tf_bf16_tiles makes it (per 16-step: pieces hi, mid, lo).
__device__ __forceinline__ void tf_bf16_stage(const float* x, const u16* w16, int m, int n, int k, int kend, bool wvec, int n0, int s,
                                              float part[2][4]) {
    int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[ni][e] = 0.0f;
#pragma unroll
    for (int step = 0; step < 2; ++step) {
        int k0 = s * MMA_BK + 16 * step;
        u32 b[2][2];
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) {
            int gn = n0 + ni * 8 + g;
#pragma unroll
            for (int h = 0; h < 2; ++h) b[ni][h] = gn < n ? tf_bf16_pair(w16, gn, k, k0 + 2 * t4 + 8 * h, kend, wvec) : 0u;
        }
        // A fragments: rows g and g + 8, k pairs at 2 t4 and 2 t4 + 8, each split exactly as tf_bf16_tiles stores them.
        u32 a[3][4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            int row = g + 8 * (e % 2), kk = k0 + 2 * t4 + 8 * (e / 2);
            const float* xr = x + (size_t)row * k;
            float x0 = row < m && kk < kend ? xr[kk] : 0.0f;
            float x1 = row < m && kk + 1 < kend ? xr[kk + 1] : 0.0f;
            u32 hi = tf_bf16x2(x0, x1);
            float r0 = x0 - tf_bf16_lo(hi), r1 = x1 - tf_bf16_hi(hi);
            u32 mid = tf_bf16x2(r0, r1);
            a[0][e] = hi;
            a[1][e] = mid;
            a[2][e] = tf_bf16x2(r0 - tf_bf16_lo(mid), r1 - tf_bf16_hi(mid));
        }
#pragma unroll
        for (int piece = 0; piece < 3; ++piece)
#pragma unroll
            for (int ni = 0; ni < 2; ++ni) tf_mma_bf16(part[ni], a[piece], b[ni]);
    }
}

// Up to 16 rows (decode), 16-column tiles. split: a warp per (tile, stage) stores that stage's partial in parts [stage][m][n] for
// bf16_gemm_chain; else a warp per tile adds its stages' partials in order (the tiles' chain) and writes y.
extern "C" __global__ void __launch_bounds__(256) bf16_gemm_rows(const float* x, const u16* w16, float* parts, float* y, int m, int n, int k,
                                                                int split) {
    int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    int kend = k;
#ifdef TF_FAULT_drop_tail
    kend = k - 1;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK, tiles = (n + 15) / 16;
    bool wvec = k % 2 == 0 && ((size_t)w16 % 4) == 0;
    int warps = gridDim.x * (blockDim.x / 32), units = split ? tiles * stages : tiles;
    for (int u = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; u < units; u += warps) {
        int s0 = split ? u / tiles : 0, s1 = split ? s0 + 1 : stages, n0 = (u % tiles) * 16;
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 2
        for (int s = s0; s < s1; ++s) {
            float part[2][4];
            tf_bf16_stage(x, w16, m, n, k, kend, wvec, n0, s, part);
#pragma unroll
            for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[ni][e] = acc[ni][e] + part[ni][e];
        }
#pragma unroll
        for (int ni = 0; ni < 2; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                int row = g + 8 * (e / 2), col = n0 + ni * 8 + 2 * t4 + e % 2;
                bool skip = row >= m || col >= n;
#ifdef TF_FAULT_skip_last_row
                skip = skip || (!split && row == m - 1);
#endif
                if (skip) continue;
                if (split)
                    parts[((size_t)s0 * m + row) * n + col] = acc[ni][e];
                else
                    y[(size_t)row * n + col] = acc[ni][e];
            }
    }
}

// Each output the sum of its stage partials in stage order, as tf_bf16_tiles adds them.
extern "C" __global__ void __launch_bounds__(256) bf16_gemm_chain(const float* parts, float* y, int m, int n, int stages) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)m * n; i += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < stages; ++s) acc = acc + parts[(size_t)s * m * n + i];
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = (int)(i / n) == m - 1;
#endif
        if (!skip) y[i] = acc;
    }
}
