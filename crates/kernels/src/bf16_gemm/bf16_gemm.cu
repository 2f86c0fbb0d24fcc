// bf16_gemm: y = x . W^T on tensor cores; x split exactly into three bf16 pieces (hi, mid, lo), K in fixed 32-wide stages (six MMAs into a partial, then one add), so a row's bits never depend on M or the tile.
extern "C" __global__ void __launch_bounds__(256, 2) bf16_gemm(const float* x, const u16* w, float* y, int m, int n, int k) {
    tf_grid_begin();
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

// A fragments of one k16 step at k0 for up to 16 rows: rows g and g + 8, k pairs at 2 t4 and 2 t4 + 8, each split exactly as tf_bf16_tiles stores them.
__device__ __forceinline__ void tf_bf16_afrag(const float* x, int m, int k, int kend, int k0, u32 a[3][4]) {
    int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        int row = g + 8 * (e % 2), kk = k0 + 2 * t4 + 8 * (e / 2);
        const float* xr = x + (size_t)row * k;
        float x0 = row < m && kk < kend ? xr[kk] : 0.0f;
        float x1 = row < m && kk + 1 < kend ? xr[kk + 1] : 0.0f;
        u32 p[3];
        tf_bf16_split3(x0, x1, p);
        a[0][e] = p[0], a[1][e] = p[1], a[2][e] = p[2];
    }
}

// One k16 step's MMAs into part: pieces hi, mid, lo, each over both 8-column halves.
__device__ __forceinline__ void tf_bf16_step(const u32 a[3][4], const u32 b[2][2], float part[2][4]) {
#pragma unroll
    for (int piece = 0; piece < 3; ++piece)
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) tf_mma_bf16(part[ni], a[piece], b[ni]);
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
        u32 a[3][4];
        tf_bf16_afrag(x, m, k, kend, k0, a);
        tf_bf16_step(a, b, part);
    }
}

// Each warp's shared ring of the 16-byte path: BF16_RING slots, each BF16_FILL 32-wide stages of 16 columns (1 KiB a stage).
#define BF16_RING 2
#define BF16_FILL 2
#define BF16_SLOT (1024 * BF16_FILL)

// Byte offset of column c's 16-byte chunk q (k 8 q to 8 q + 7) in a ring slot, swizzled so ldmatrix's eight columns hit distinct banks.
__device__ __forceinline__ u32 tf_bf16_ring_off(int c, int q) {
    int f = BF16_FILL == 1 ? (c >> 1) & 3 : c & 7;
    return (u32)(c * 64 * BF16_FILL + ((q ^ f) << 4));
}

// Copies slot-sized fill i (stages BF16_FILL i onwards) of the 16 columns from n0 to shared address dst: zeros past n and kend.
__device__ __forceinline__ void tf_bf16_ring_fill(const u16* w16, int n, int k, int kend, int n0, int i, u32 dst) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < 2 * BF16_FILL; ++j) {
        int id = lane + 32 * j, c = id / (4 * BF16_FILL), q = id % (4 * BF16_FILL), gn = n0 + c;
        int kk = i * BF16_FILL * MMA_BK + 8 * q;
        int bytes = gn < n ? 2 * max(0, min(8, kend - kk)) : 0;
        tf_cp_async16_at(dst + tf_bf16_ring_off(c, q), bytes > 0 ? (const void*)(w16 + (size_t)gn * k + kk) : (const void*)w16, bytes);
    }
}

// Streams the 16 columns from n0 through the warp's ring, 16-byte copies a slot ahead, calling stage(slot, j, s) for stage s, the slot's j-th, once it has landed.
template <class Stage>
__device__ __forceinline__ void tf_bf16_ring_walk(const u16* w16, int n, int k, int kend, int stages, int n0, u32 ring, Stage&& stage) {
    int fills = (stages + BF16_FILL - 1) / BF16_FILL;
#pragma unroll
    for (int i = 0; i < BF16_RING - 1; ++i) {
        if (i < fills) tf_bf16_ring_fill(w16, n, k, kend, n0, i, ring + i * BF16_SLOT);
        tf_cp_commit();
    }
    for (int i = 0; i < fills; ++i) {
        int ahead = i + BF16_RING - 1;
        if (ahead < fills) tf_bf16_ring_fill(w16, n, k, kend, n0, ahead, ring + (ahead % BF16_RING) * BF16_SLOT);
        tf_cp_commit();
#ifndef TF_FAULT_race_no_sync
        asm volatile("cp.async.wait_group %0;" ::"n"(BF16_RING - 1) : "memory");
        __syncwarp();
#endif
        u32 slot = ring + (i % BF16_RING) * BF16_SLOT;
#pragma unroll
        for (int j = 0; j < BF16_FILL; ++j) {
            int s = i * BF16_FILL + j;
            if (s >= stages) break;
            stage(slot, j, s);
        }
        __syncwarp();
    }
}

// A warp's tile of 16 columns from n0 over all stages, weights streamed through its ring with 16-byte copies (k a multiple of 8, w16 16-byte aligned).
__device__ __forceinline__ void tf_bf16_ring_tile(const float* x, const u16* w16, int m, int n, int k, int kend, int stages, int n0, u32 ring,
                                                  float acc[2][4]) {
    int lane = threadIdx.x % 32;
    tf_bf16_ring_walk(w16, n, k, kend, stages, n0, ring, [&](u32 slot, int j, int s) {
        float part[2][4];
#pragma unroll
        for (int ni = 0; ni < 2; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[ni][e] = 0.0f;
#pragma unroll
        for (int step = 0; step < 2; ++step) {
            // ldmatrix's four 8x8 pieces: (columns 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) of this step.
            int c = (lane / 16) * 8 + lane % 8, q = 4 * j + 2 * step + (lane / 8) % 2;
            u32 r[4];
            tf_ldmatrix_x4_at(r, slot + tf_bf16_ring_off(c, q));
            u32 b[2][2] = {{r[0], r[1]}, {r[2], r[3]}};
            u32 a[3][4];
            tf_bf16_afrag(x, m, k, kend, s * MMA_BK + 16 * step, a);
            tf_bf16_step(a, b, part);
        }
#pragma unroll
        for (int ni = 0; ni < 2; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[ni][e] = acc[ni][e] + part[ni][e];
    });
}

// x row `row`'s B fragments of one k16 step at k0 (k pairs at 2 t4 and 2 t4 + 8), split exactly as tf_bf16_afrag splits them.
__device__ __forceinline__ void tf_bf16_bfrag(const float* x, int m, int k, int kend, int k0, int row, u32 b[3][2]) {
    int t4 = threadIdx.x % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        int kk = k0 + 2 * t4 + 8 * h;
        const float* xr = x + (size_t)row * k;
        float x0 = row < m && kk < kend ? xr[kk] : 0.0f;
        float x1 = row < m && kk + 1 < kend ? xr[kk + 1] : 0.0f;
        u32 p[3];
        tf_bf16_split3(x0, x1, p);
        b[0][h] = p[0], b[1][h] = p[1], b[2][h] = p[2];
    }
}

// tf_bf16_ring_tile with the weights as the MMA's A (16 columns a step) and x rows as its B (8 a block): the same products and chains, writing y.
__device__ __forceinline__ void tf_bf16_ring_tile_t(const float* x, const u16* w16, float* y, int m, int n, int k, int kend, int stages, int n0,
                                                    u32 ring) {
    int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4, blocks = m > 8 ? 2 : 1;
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    tf_bf16_ring_walk(w16, n, k, kend, stages, n0, ring, [&](u32 slot, int j, int s) {
        float part[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
        for (int step = 0; step < 2; ++step) {
            // ldmatrix's four 8x8 pieces as the A fragment: (columns 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
            int c = ((lane / 8) % 2) * 8 + lane % 8, q = 4 * j + 2 * step + lane / 16;
            u32 a[4];
            tf_ldmatrix_x4_at(a, slot + tf_bf16_ring_off(c, q));
            u32 b[2][3][2];
#pragma unroll
            for (int nb = 0; nb < 2; ++nb)
                if (nb < blocks) tf_bf16_bfrag(x, m, k, kend, s * MMA_BK + 16 * step, nb * 8 + g, b[nb]);
#pragma unroll
            for (int piece = 0; piece < 3; ++piece)
#pragma unroll
                for (int nb = 0; nb < 2; ++nb)
                    if (nb < blocks) tf_mma_bf16(part[nb], a, b[nb][piece]);
        }
#pragma unroll
        for (int nb = 0; nb < 2; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[nb][e] = acc[nb][e] + part[nb][e];
    });
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            int row = nb * 8 + 2 * t4 + e % 2, col = n0 + g + 8 * (e / 2);
            bool skip = row >= m || col >= n;
#ifdef TF_FAULT_skip_last_row
            skip = skip || row == m - 1;
#endif
            if (!skip) y[(size_t)row * n + col] = acc[nb][e];
        }
}

// Up to 16 rows (decode), 16-column tiles. split: a warp per (tile, stage) stores that stage's partial in parts [stage][m][n] for
// bf16_gemm_chain; else a warp per tile adds its stages' partials in order (the tiles' chain, weights through its ring when aligned) and writes y.
extern "C" __global__ void __launch_bounds__(256, 3) bf16_gemm_rows(const float* x, const u16* w16, float* parts, float* y, int m, int n, int k,
                                                                int split) {
    tf_grid_begin();
    int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    int kend = k;
#ifdef TF_FAULT_drop_tail
    kend = k - 1;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK, tiles = (n + 15) / 16;
    bool wvec = k % 2 == 0 && ((size_t)w16 % 4) == 0;
    __shared__ __align__(128) u8 rings[8][BF16_RING * BF16_SLOT];
    bool ring_ok = !split && k % 8 == 0 && ((size_t)w16 % 16) == 0 && blockDim.x == 256;
    u32 ring = tf_smem_addr(rings[(threadIdx.x / 32) % 8]);
    int warps = gridDim.x * (blockDim.x / 32), units = split ? tiles * stages : tiles;
    for (int u = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; u < units; u += warps) {
        int s0 = split ? u / tiles : 0, s1 = split ? s0 + 1 : stages, n0 = (u % tiles) * 16;
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        // Up to 8 rows fill one 8-wide B block, so the weights ride as A (half the MMAs); more keep x as A.
        if (ring_ok && m <= 8) {
            tf_bf16_ring_tile_t(x, w16, y, m, n, k, kend, stages, n0, ring);
            continue;
        }
        if (ring_ok) {
            tf_bf16_ring_tile(x, w16, m, n, k, kend, stages, n0, ring, acc);
            s1 = s0;
        }
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

// bf16_gemm_chain: a warp per output, its lanes loading the stage partials 128 at a time, every lane adding them in stage order (lane 0 writes y).
extern "C" __global__ void __launch_bounds__(256) bf16_gemm_chain(const float* parts, float* y, int m, int n, int stages) {
    tf_grid_begin();
    int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    size_t outs = (size_t)m * n;
    for (size_t i = (size_t)blockIdx.x * warps + threadIdx.x / 32; i < outs; i += (size_t)gridDim.x * warps) {
        float acc = 0.0f;
        for (int s0 = 0; s0 < stages; s0 += 128) {
            float p[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                int s = s0 + 32 * u + lane;
                p[u] = s < stages ? parts[(size_t)s * outs + i] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int j = 0; j < 32; ++j) {
                    float v = __shfl_sync(0xffffffffu, p[u], j);
                    if (s0 + 32 * u + j < stages) acc = acc + v;
                }
        }
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = (int)(i / n) == m - 1;
#endif
        if (lane == 0 && !skip) y[i] = acc;
    }
}
