// Decode rows GEMMs (fp8_gemm_rows, mxfp4_gemm_rows, their _rows8 and _rows_long entries): up to 16 rows in 16-column tiles, each output element the same fixed chain as tf_mma_pipe's tiles (mma.cuh), so rows and tiles give the same bits at any M.
#define ROWS_BN 16
#define ROWS_MAX 16

// 16 bytes of read-only global memory, not kept in L1.
__device__ __forceinline__ uint4 tf_ldg16(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// The first `bytes` (0..16) of src as 16 bytes, the rest zero; one 16-byte load when all are there and src is aligned.
__device__ __forceinline__ uint4 tf_ldg_part(const u8* src, int bytes, bool vec) {
    if (bytes == 16 && vec) return tf_ldg16(src);
    u64 lo = 0, hi = 0;
#pragma unroll 1
    for (int b = 0; b < bytes; ++b) {
        u64 v = (u64)src[b] << (8 * (b % 8));
        if (b < 8)
            lo |= v;
        else
            hi |= v;
    }
    return make_uint4((u32)lo, (u32)(lo >> 32), (u32)hi, (u32)(hi >> 32));
}

// tf_mma_f16 with rows 8 to 15 of A zero: d[0], d[1] (rows 0 to 7) chained as there, the upper rows' sums dropped.
__device__ __forceinline__ void tf_mma_f16_lo(float* d, const u32* a, const u32* b) {
    float x0, x1;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%10,%10};"
                 : "+f"(d[0]), "+f"(d[1]), "=f"(x0), "=f"(x1)
                 : "r"(a[0]), "r"(0u), "r"(a[2]), "r"(0u), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// Bytes 0, 1 and 2, 3 of x (e4m3 codes, never NaN) as exact f16x2 words, the values tf_e4m3x2_to_f16x2 gives; one conversion each on sm_89 and later.
__device__ __forceinline__ void tf_rows_e4m3x4(u32 x, u32* b) {
#if __CUDA_ARCH__ >= 890
    asm("{.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, lo;\n\tcvt.rn.f16x2.e4m3x2 %1, hi;\n\t}"
        : "=r"(b[0]), "=r"(b[1])
        : "r"(x));
#else
    b[0] = tf_e4m3x2_to_f16x2(x, 0x1404u), b[1] = tf_e4m3x2_to_f16x2(x, 0x3424u);
#endif
}

// A 16-byte piece of weight codes permuted so 32-bit word t4 is lane t4's fragment: FP8 k pairs 2 t4 and 8 + 2 t4 (b0, b1); FP4 bytes t4, t4 + 4, t4 + 8, t4 + 12 (the lane's (j, h) = (0, 0), (0, 1), (1, 0), (1, 1)).
template <int FMT>
__device__ __forceinline__ uint4 tf_rows_permute(uint4 x) {
    uint4 o;
    if constexpr (FMT == MMA_FP8) {
        o.x = __byte_perm(x.x, x.z, 0x5410), o.y = __byte_perm(x.x, x.z, 0x7632);
        o.z = __byte_perm(x.y, x.w, 0x5410), o.w = __byte_perm(x.y, x.w, 0x7632);
    } else {
        u32 a = __byte_perm(x.x, x.y, 0x5140), b = __byte_perm(x.z, x.w, 0x5140);
        u32 c = __byte_perm(x.x, x.y, 0x7362), d = __byte_perm(x.z, x.w, 0x7362);
        o.x = __byte_perm(a, b, 0x5410), o.y = __byte_perm(a, b, 0x7632);
        o.z = __byte_perm(c, d, 0x5410), o.w = __byte_perm(c, d, 0x7632);
    }
    return o;
}

// The contract's reversed K order (order_by_tile) and swapped nibbles (swap_nibbles) controls; false and 0 outside their builds.
__device__ __forceinline__ bool tf_fault_rev() {
#ifdef TF_FAULT_order_by_tile
    return true;
#else
    return false;
#endif
}
__device__ __forceinline__ int tf_fault_swap() {
#ifdef TF_FAULT_swap_nibbles
    return 1;
#else
    return 0;
#endif
}

// FP4: the four codes of 128-block c in scale row `row` as one word (codes past `stages` 32-blocks zero).
__device__ __forceinline__ u32 tf_codes4(const u8* row, int c, int stages) {
    u32 v = 0;
#pragma unroll
    for (int s = 0; s < 4; ++s)
        if (4 * c + s < stages) v |= (u32)row[4 * c + s] << (8 * s);
    return v;
}

// tf_mma_rows' shared memory, one layout for both of its row counts.
template <int FMT>
struct TfRowsSmem {
    static constexpr int P = 1, WROW = FMT == MMA_FP8 ? 128 : 64;
    float pbuf[8][P][ROWS_MAX * ROWS_BN];
    __align__(16) u8 wst[8][ROWS_BN * WROW];
    float sws[8 * P][ROWS_BN];
    float sas[ROWS_MAX][8];
};

// Up to 16 rows (decode; HI: rows 8 to 15 may be live) as tf_mma_pipe computes them, in 16-column tiles: warp w makes the partials of 128-wide K chunks w, w + 8, ... (weights in 16-byte loads D rounds ahead, to B fragments through the warp's own shared rows), then the threads of live rows add them in K order. OPEN: the grid wait is still to come, after the first tile's weight loads.
template <int FMT, bool HI, bool OPEN = false>
__device__ __forceinline__ void tf_mma_rows(TfRowsSmem<FMT>& sm, const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                            const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    // Partials a chunk: one, per 128-block.
    constexpr int P = 1;
    // Bytes a weight row holds of a chunk, 16-byte pieces a lane loads of it, rounds loaded ahead.
    constexpr int WROW = FMT == MMA_FP8 ? 128 : 64;
    constexpr int NP = ROWS_BN * WROW / 16 / 32;
    constexpr int D = FMT == MMA_FP8 ? 1 : 2;
    auto& pbuf = sm.pbuf;
    auto& wst = sm.wst;
    auto& sws = sm.sws;
    auto& sas = sm.sas;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
    int tiles = (n + ROWS_BN - 1) / ROWS_BN;
    int nblk = (k + 127) / 128;
    int kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * 128;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK;
    int chunks = (stages + 3) / 4, rounds = (chunks + 7) / 8;
    int parts = chunks;
    bool rev = tf_fault_rev();
    int swap = tf_fault_swap();
    size_t wstride = FMT == MMA_FP8 ? (size_t)k : (size_t)(k / 2);
    bool vec = wstride % 16 == 0 && ((size_t)w % 16) == 0;
    int orow = tid / ROWS_BN, ocol = tid % ROWS_BN;
    // Piece p of a lane: row pr(p), 16 bytes at pk(p) of the chunk's row (FP8: 8 lanes a row; FP4: 4 lanes a row).
    auto pr = [&](int p) { return FMT == MMA_FP8 ? 4 * p + lane / 8 : 8 * p + lane / 4; };
    auto pk = [&](int p) { return FMT == MMA_FP8 ? lane % 8 : lane % 4; };
    u8* ws = wst[warp];
    bool waited = !OPEN;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int n0 = tile * ROWS_BN;
        float acc = 0.0f;
        // This warp's weight pieces of round rr (zeros outside the matrix or past the last round).
        auto fetch = [&](int rr, uint4* wp) {
            int c = 8 * (rev ? rounds - 1 - rr : rr) + warp;
            // A whole chunk of 16 columns inside the matrix: plain loads, no per-piece tests.
            bool whole = FMT == MMA_FP8 ? c * 128 + 128 <= kend : 4 * c + 4 <= stages;
            if (rr < rounds && whole && n0 + ROWS_BN <= n && vec) {
#pragma unroll
                for (int p = 0; p < NP; ++p) wp[p] = tf_ldg16(w + (n0 + pr(p)) * wstride + c * WROW + 16 * pk(p));
                return;
            }
#pragma unroll
            for (int p = 0; p < NP; ++p) {
                int gn = n0 + pr(p), v = pk(p), bytes = 0;
                if (rr < rounds && gn < n) {
                    if constexpr (FMT == MMA_FP8)
                        bytes = c * 128 + 16 * v < stages * MMA_BK ? max(0, min(16, kend - c * 128 - 16 * v)) : 0;
                    else
                        bytes = 4 * c + v < stages ? 16 : 0;
                }
                wp[p] = tf_ldg_part(w + gn * wstride + c * WROW + 16 * v, bytes, vec);
            }
        };
        // Pieces to this warp's rows, each permuted so one 32-bit word is one lane's fragment, 16-byte slots swizzled against bank conflicts.
        auto stage = [&](const uint4* wp) {
#pragma unroll
            for (int p = 0; p < NP; ++p) {
                int row = pr(p), v = pk(p);
                int sw = FMT == MMA_FP8 ? v ^ (row & 7) : v ^ ((row >> 1) & 3);
                *(uint4*)&ws[row * WROW + (sw << 4)] = tf_rows_permute<FMT>(wp[p]);
            }
        };
        // Activations and scales of round rr (zeros past the last round), loaded a round ahead of their use.
        constexpr int NS = (8 * P * ROWS_BN + 255) / 256;
        u32 af[8][4];
        float sw_ld[NS], sa_ld;
        // FP4: the codes of this lane's B columns ni * 8 + g in the next round's chunk.
        u32 lc[2] = {0u, 0u};
        auto load_a = [&](int rr) {
            int r = rev ? rounds - 1 - rr : rr;
            int c = 8 * r + warp;
            // A chunk wholly inside K: the same words with only the row tests, hoisted out of the loads.
            if (rr < rounds && c < chunks && c * 128 + 128 <= kend) {
                const u16* base = q + (size_t)g * q_stride + c * 128 + 2 * t4;
                bool lo = g < m, hi = HI && g + 8 < m;
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const u16* src = base + (e % 2) * 8 * (size_t)q_stride + 16 * j + 8 * (e / 2);
                        af[j][e] = (e % 2 ? hi : lo) ? *(const u32*)src : 0u;
                    }
            } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                int k0 = c * 128 + 16 * j;
                bool live = rr < rounds && c < chunks && k0 < stages * MMA_BK;
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    int row = g + 8 * (e % 2), kk = k0 + 2 * t4 + 8 * (e / 2);
                    const u16* src = q + (size_t)row * q_stride + kk;
                    u32 v = 0;
                    if (!HI && e % 2)
                        v = 0;
                    else if (live && row < m && kk + 1 < kend)
                        v = *(const u32*)src;
                    else if (live && row < m && kk < kend)
                        v = src[0];
                    af[j][e] = v;
                }
            }
            }
#pragma unroll
            for (int e = 0; e < NS; ++e) {
                int i = (tid + 256 * e) % (8 * P), t = 8 * r * P + i;
                int gn = min(n0 + (tid + 256 * e) / (8 * P), n - 1);
                sw_ld[e] = 0.0f;
                if (rr < rounds && tid + 256 * e < 8 * P * ROWS_BN && t < parts)
                    sw_ld[e] = FMT == MMA_FP8 ? tf_e8m0_to_f32(w_scale[(size_t)((col0 + gn) / 128) * nblk + t])
                                              : tf_e8m0_to_f32((u8)tf_code_max4(tf_codes4(w_scale + (size_t)gn * (k / 32), t, stages)));
            }
            if constexpr (FMT == MMA_FP4) {
#pragma unroll
                for (int ni = 0; ni < 2; ++ni) {
                    int gn = n0 + ni * 8 + g;
                    lc[ni] = rr < rounds && c < chunks && gn < n ? tf_codes4(w_scale + (size_t)gn * (k / 32), c, stages) : 0u;
                }
            }
            sa_ld = 0.0f;
            if (rr < rounds && tid < ROWS_MAX * 8 && 8 * r + tid % 8 < chunks)
                sa_ld = q_scale[(size_t)min(tid / 8, m - 1) * qs_stride + 8 * r + tid % 8];
        };
        // One round: stage its weights, fetch round rr + D into the same registers, MMA the chunk, load round rr + 1's activations, then the K-ordered adds.
        auto round = [&](int rr, uint4* wp) {
            if (rr >= rounds) return;
            int r = rev ? rounds - 1 - rr : rr;
            int c = 8 * r + warp;
            stage(wp);
            fetch(rr + D, wp);
            __syncwarp();
            float part[P][2][4];
#pragma unroll
            for (int p = 0; p < P; ++p)
#pragma unroll
                for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                    for (int e = 0; e < 4; ++e) part[p][ni][e] = 0.0f;
            if (c < chunks) {
                // FP4: each 32-block's multiplier (tf_fold_mul) for this lane's two columns.
                u32 fm[2][4];
                if constexpr (FMT == MMA_FP4) {
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) {
                        int e = tf_code_max4(lc[ni]);
#pragma unroll
                        for (int t = 0; t < 4; ++t) fm[ni][t] = tf_fold_mul((int)((lc[ni] >> (8 * t)) & 0xffu), e);
                    }
                }
                // bw[x][mi]: fragment words of (ni, j) = (mi % 2, 2 x + mi / 2) for FP8, of (ni, 16-byte piece) = (mi % 2, 2 x + mi / 2) for FP4.
                constexpr int NX = FMT == MMA_FP8 ? 4 : 2;
                u32 bw[NX][4];
#pragma unroll
                for (int x = 0; x < NX; ++x) {
                    int mi = lane / 8, row = (mi % 2) * 8 + lane % 8, v = 2 * x + mi / 2;
                    int sw = FMT == MMA_FP8 ? (v ^ (row & 7)) : (v ^ ((row >> 1) & 3));
                    tf_ldmatrix_x4(bw[x], (const u16*)&ws[row * WROW + (sw << 4)]);
                }
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    if (c * 128 + 16 * j >= stages * MMA_BK) break;
                    constexpr int PD = 8;
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) {
                        u32 b[2];
                        if constexpr (FMT == MMA_FP8) {
                            tf_rows_e4m3x4(bw[j / 2][ni + 2 * (j % 2)], b);
                        } else {
                            u32 x = bw[j / 4][ni + 2 * ((j / 2) % 2)] >> (16 * (j % 2));
                            b[0] = tf_e2m1x2_to_f16x2_by(x & 0xffu, swap, fm[ni][j / 2]), b[1] = tf_e2m1x2_to_f16x2_by((x >> 8) & 0xffu, swap, fm[ni][j / 2]);
                        }
                        if constexpr (HI)
                            tf_mma_f16(part[j / PD][ni], af[j], b);
                        else
                            tf_mma_f16_lo(part[j / PD][ni], af[j], b);
                    }
                }
#pragma unroll
                for (int p = 0; p < P; ++p)
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                        for (int e = 0; e < (HI ? 4 : 2); ++e) pbuf[warp][p][(g + 8 * (e / 2)) * ROWS_BN + ni * 8 + 2 * t4 + e % 2] = part[p][ni][e];
            }
#pragma unroll
            for (int e = 0; e < NS; ++e)
                if (tid + 256 * e < 8 * P * ROWS_BN) sws[(tid + 256 * e) % (8 * P)][(tid + 256 * e) / (8 * P)] = sw_ld[e];
            if (tid < ROWS_MAX * 8) sas[tid / 8][tid % 8] = sa_ld;
            load_a(rr + 1);
#if !defined(TF_FAULT_race_no_sync) && !defined(TF_FAULT_race_rows)
            __syncthreads();
#endif
            // The round's partials into each output, in K order: per 128-block, as tf_mma_pipe's closes; eight read ahead of their adds; warps holding no live row skip them.
            if (2 * warp < m)
#pragma unroll
            for (int i0 = 0; i0 < 8 * P; i0 += 8) {
                float pv[8], sv[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    int i = rev ? 8 * P - 1 - i0 - u : i0 + u;
                    float sa = sas[orow][i / P];
#ifdef TF_FAULT_lost_act_scale
                    sa = 1.0f;
#endif
                    pv[u] = pbuf[i / P][i % P][orow * ROWS_BN + ocol], sv[u] = sa * sws[i][ocol];
                }
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    int i = rev ? 8 * P - 1 - i0 - u : i0 + u;
                    if (8 * r * P + i < parts) acc = fmaf(pv[u], sv[u], acc);
                }
            }
            __syncthreads();
        };
        uint4 wb[D][NP];
#pragma unroll
        for (int d = 0; d < D; ++d) fetch(d, wb[d]);
        if (!waited) tf_grid_wait(), waited = true;
        load_a(0);
        for (int rb = 0; rb < rounds; rb += D)
#pragma unroll
            for (int d = 0; d < D; ++d) round(rb + d, wb[d]);
        tf_store_y(y, y_stride, m, n, orow, n0 + ocol, acc);
    }
    if (!waited) tf_grid_wait();
}

// tf_e8m0_to_f32 by selects, no branches: the same bits.
__device__ __forceinline__ float tf_e8m0_sel(u8 c) {
    u32 v = (u32)c << 23;
    v = c == 0u ? 0x00400000u : v;
    return __uint_as_float(c == 255u ? 0x7fc00000u : v);
}

// Asynchronous copy of `bytes` (0..4, the rest zero-filled) from global src into 4 bytes at shared address dst.
__device__ __forceinline__ void tf_cp_async4_at(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}

// Waits until at most N of this thread's committed copy groups are still in flight.
template <int N>
__device__ __forceinline__ void tf_cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// tf_mma_rows_lo's shared memory for up to 8 rows: each warp's ring of raw weight chunks (and, FP4, their scale bytes), a round's partials of rows 0 to 7, and scales; NB buffers of those (two where they fit beside the ring in 48 KiB, so a round needs one barrier).
template <int FMT>
struct TfRowsLoSmem {
    static constexpr int P = 1, WROW = FMT == MMA_FP8 ? 128 : 64, RD = FMT == MMA_FP8 ? 2 : 3;
    static constexpr int NB = 2;
    __align__(16) u8 ring[8][RD][ROWS_BN * WROW];
    __align__(16) u8 rsc[8][RD][FMT == MMA_FP8 ? 16 : ROWS_BN * 4];
    struct Parts {
        float pbuf[8][P][8 * ROWS_BN];
        float sws[8 * P][ROWS_BN];
        float sas[8][8];
    } parts[NB];
};

// Up to 8 rows (decode) as tf_mma_pipe computes them, in 16-column tiles: warp w makes the partials of 128-wide K chunks w, w + 8, ... of the block's tiles in turn (copied RD rounds ahead, across tiles, into its own shared ring, then byte-permuted in place to B fragments), then the threads of live rows add them in K order. OPEN: the grid wait is still to come, after the first weight copies.
template <int FMT, bool OPEN = false>
__device__ __forceinline__ void tf_mma_rows_lo(TfRowsLoSmem<FMT>& sm, const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                               const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    using S = TfRowsLoSmem<FMT>;
    constexpr int P = S::P, WROW = S::WROW, RD = S::RD, NB = S::NB;
    constexpr int NP = ROWS_BN * WROW / 16 / 32, RA = 4;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
    int tiles = (n + ROWS_BN - 1) / ROWS_BN;
    int nblk = (k + 127) / 128;
    int kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * 128;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK;
    int chunks = (stages + 3) / 4, rounds = (chunks + 7) / 8;
    int parts = chunks;
    bool rev = tf_fault_rev();
    int swap = tf_fault_swap();
    size_t wstride = FMT == MMA_FP8 ? (size_t)k : (size_t)(k / 2);
    bool vec = wstride % 16 == 0 && ((size_t)w % 16) == 0;
    bool svec = FMT == MMA_FP4 && (k / 32) % 4 == 0 && ((size_t)w_scale % 4) == 0;
    int orow = tid / ROWS_BN, ocol = tid % ROWS_BN, prow = orow;
    // This block's items: the rounds of each of its tiles blockIdx.x, blockIdx.x + gridDim.x, ... in turn; item it is round rr of the block's tile tq, it = tq * rounds + rr.
    int items = (int)blockIdx.x < tiles ? ((tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1) * rounds : 0;
    auto tile_at = [&](int tq) { return (int)blockIdx.x + tq * (int)gridDim.x; };
    auto round_at = [&](int rr) { return rev ? rounds - 1 - rr : rr; };
    // Piece p of a lane: row pr(p), 16 bytes at pk(p) of the chunk's row (FP8: 8 lanes a row; FP4: 4 lanes a row), at byte poff(p) of a ring slot (16-byte slots swizzled against bank conflicts).
    auto pr = [&](int p) { return FMT == MMA_FP8 ? 4 * p + lane / 8 : 8 * p + lane / 4; };
    auto pk = [&](int p) { return FMT == MMA_FP8 ? lane % 8 : lane % 4; };
    // Rows differing by a multiple of 8 share a swizzle.
    auto swz = [&](int row, int v) { return FMT == MMA_FP8 ? (v ^ (row & 7)) : (v ^ ((row >> 1) & 3)); };
    // The swizzle sees only pr(p)'s low bits: FP8 row & 7 is 4 (p % 2) + lane / 8, FP4 (row >> 1) & 3 is (lane / 4 >> 1) & 3, so pieces share offsets up to constants.
    auto poff = [&](int p) { return pr(p) * WROW + (swz(FMT == MMA_FP8 ? 4 * (p % 2) + lane / 8 : lane / 4, pk(p)) << 4); };
    u32 ring0 = tf_smem_addr(&sm.ring[warp][0][0]), rsc0 = tf_smem_addr(&sm.rsc[warp][0][0]);
    // Item it's (round rr of tile tq) weight pieces of this warp (FP4: and scale bytes) into ring slot it % RD, zeros outside the matrix; one copy group a call.
    auto issue = [&](int it, int tq, int rr) {
        if (it < items) {
            int n0 = tile_at(tq) * ROWS_BN, c = 8 * round_at(rr) + warp, slot = it % RD;
            u32 dst = ring0 + (u32)(slot * ROWS_BN * WROW);
            bool whole = (FMT == MMA_FP8 ? c * 128 + 128 <= kend : 4 * c + 4 <= stages) && n0 + ROWS_BN <= n;
#pragma unroll
            for (int p = 0; p < NP; ++p) {
                int gn = n0 + pr(p), v = pk(p), bytes = 16;
                if (!whole) {
                    bytes = 0;
                    if (gn < n) {
                        if constexpr (FMT == MMA_FP8)
                            bytes = c * 128 + 16 * v < stages * MMA_BK ? max(0, min(16, kend - c * 128 - 16 * v)) : 0;
                        else
                            bytes = 4 * c + v < stages ? 16 : 0;
                    }
                }
                const u8* src = w + (size_t)min(gn, n - 1) * wstride + c * WROW + 16 * v;
                if (vec)
                    tf_cp_async16_at(dst + poff(p), bytes > 0 ? src : w, bytes);
                else
                    *(uint4*)&sm.ring[warp][slot][poff(p)] = tf_ldg_part(src, bytes, false);
            }
            if constexpr (FMT == MMA_FP4) {
                if (lane < ROWS_BN) {
                    int gn = n0 + lane;
                    bool live = gn < n && c < chunks;
                    const u8* src = w_scale + (size_t)min(gn, n - 1) * (k / 32) + 4 * c;
                    if (svec) {
                        tf_cp_async4_at(rsc0 + (u32)(slot * ROWS_BN * 4 + 4 * lane), live ? src : w_scale, live ? 4 : 0);
                    } else {
                        u32 v = 0;
#pragma unroll 1
                        for (int s = 0; s < 4; ++s)
                            if (live && 4 * c + s < stages) v |= (u32)src[s] << (8 * s);
                        *(u32*)&sm.rsc[warp][slot][4 * lane] = v;
                    }
                }
            }
        }
        tf_cp_commit();
    };
    // A fragments (rows 0 to 7) and scales of item it, loaded an item ahead of their use (zeros past the last item).
    u32 af[8][2];
    float sw_ld = 0.0f, sa_ld = 0.0f;
    auto load_a = [&](int it, int tq, int rr) {
        bool live = it < items;
        int r = round_at(rr), c = 8 * r + warp;
        // A chunk wholly inside K: the same words with only the row test.
        if (live && c < chunks && c * 128 + 128 <= kend) {
            const u16* base = q + (size_t)g * q_stride + c * 128 + 2 * t4;
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) af[j][h] = g < m ? *(const u32*)(base + 16 * j + 8 * h) : 0u;
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                int k0 = c * 128 + 16 * j;
                bool ok = live && c < chunks && k0 < stages * MMA_BK && g < m;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    int kk = k0 + 2 * t4 + 8 * h;
                    const u16* src = q + (size_t)g * q_stride + kk;
                    u32 v = 0;
                    if (ok && kk + 1 < kend)
                        v = *(const u32*)src;
                    else if (ok && kk < kend)
                        v = src[0];
                    af[j][h] = v;
                }
            }
        }
        if constexpr (FMT == MMA_FP8) {
            int t = 8 * r + tid % 8;
            int gn = min((live ? tile_at(tq) * ROWS_BN : 0) + tid / 8, n - 1);
            sw_ld = 0.0f;
            if (live && tid < 8 * ROWS_BN && t < parts) sw_ld = tf_e8m0_sel(w_scale[(size_t)((col0 + gn) / 128) * nblk + t]);
        }
        sa_ld = 0.0f;
        if (live && tid < 64 && 8 * r + tid % 8 < chunks) sa_ld = q_scale[(size_t)min(tid / 8, m - 1) * qs_stride + 8 * r + tid % 8];
    };
#pragma unroll
    for (int d = 0; d < RD; ++d) issue(d, d / rounds, d % rounds);
    if (OPEN) tf_grid_wait();
    load_a(0, 0, 0);
    float acc = 0.0f;
    // (tq, rr): item it's tile and round, carried from item to item.
    int tq = 0, rr = 0;
    for (int it = 0; it < items; ++it) {
        int r = round_at(rr), c = 8 * r + warp, slot = it % RD, pb = NB == 2 ? it & 1 : 0;
        u8* ws = sm.ring[warp][slot];
        auto& pt = sm.parts[pb];
        // This lane's copies of the item have landed: its pieces permuted in place so one 32-bit word is one lane's fragment.
        tf_cp_wait<RD - 1>();
#pragma unroll
        for (int p = 0; p < NP; ++p) {
            *(uint4*)&ws[poff(p)] = tf_rows_permute<FMT>(*(const uint4*)&ws[poff(p)]);
        }
        __syncwarp();
        // bw[x][mi]: fragment words of (ni, j) = (mi % 2, 2 x + mi / 2) for FP8, of (ni, 16-byte piece) = (mi % 2, 2 x + mi / 2) for FP4.
        constexpr int NX = FMT == MMA_FP8 ? 4 : 2;
        u32 bw[NX][4];
#pragma unroll
        for (int x = 0; x < NX; ++x) {
            int mi = lane / 8, row = (mi % 2) * 8 + lane % 8, v = 2 * x + mi / 2;
            tf_ldmatrix_x4(bw[x], (const u16*)&ws[row * WROW + (swz(lane % 8, v) << 4)]);
        }
        // FP4: the chunk's scale, its columns' largest code; each 32-block's multiplier (tf_fold_mul) for this lane's two columns.
        u32 fm[2][4];
        if constexpr (FMT == MMA_FP4) {
            if (lane < ROWS_BN) pt.sws[warp][lane] = tf_e8m0_sel((u8)tf_code_max4(*(const u32*)&sm.rsc[warp][slot][4 * lane]));
#pragma unroll
            for (int ni = 0; ni < 2; ++ni) {
                u32 sc = *(const u32*)&sm.rsc[warp][slot][4 * (ni * 8 + g)];
                int e = tf_code_max4(sc);
#pragma unroll
                for (int t = 0; t < 4; ++t) fm[ni][t] = tf_fold_mul((int)((sc >> (8 * t)) & 0xffu), e);
            }
        }
        // Every lane is done with the slot before it is refilled RD items on.
        __syncwarp();
        {
            // Item it + RD: RD rounds on, past as many tile ends as that crosses.
            int tn = tq, rn = rr + RD;
#pragma unroll 1
            while (rn >= rounds) rn -= rounds, ++tn;
            issue(it + RD, tn, rn);
        }
        if (c < chunks) {
            // One partial over the chunk's 8 k16 steps (FP4: steps jj, jj + 1 from the bytes of two words, one 32-block).
            float part[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
            for (int jj = 0; jj < 8; jj += 2) {
                if (c * 128 + 16 * jj >= stages * MMA_BK) break;
                u32 h[2][4];
                if constexpr (FMT == MMA_FP4) {
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) tf_e2m1x8_to_f16x2_by(bw[jj / 4][ni + 2 * ((jj / 2) % 2)], swap, fm[ni][jj / 2], h[ni]);
                }
#pragma unroll
                for (int j = jj; j < jj + 2; ++j) {
                    if (c * 128 + 16 * j >= stages * MMA_BK) break;
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) {
                        u32 b[2];
                        if constexpr (FMT == MMA_FP8)
                            tf_rows_e4m3x4(bw[j / 2][ni + 2 * (j % 2)], b);
                        else
                            b[0] = h[ni][2 * (j % 2)], b[1] = h[ni][2 * (j % 2) + 1];
                        u32 a[4] = {af[j][0], 0u, af[j][1], 0u};
                        tf_mma_f16_lo(part[ni], a, b);
                    }
                }
                if (jj == 6) {
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            pt.pbuf[warp][0][g * ROWS_BN + ni * 8 + 2 * t4 + e] = part[ni][e];
                            part[ni][e] = 0.0f;
                        }
                }
            }
            // A chunk cut short by K: its partial as far as it goes.
            if (c * 128 + 128 > stages * MMA_BK) {
#pragma unroll
                for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        pt.pbuf[warp][0][g * ROWS_BN + ni * 8 + 2 * t4 + e] = part[ni][e];
            }
        }
        if constexpr (FMT == MMA_FP8) {
            if (tid < 8 * ROWS_BN) pt.sws[tid % 8][tid / 8] = sw_ld;
        }
        if (tid < 64) pt.sas[tid / 8][tid % 8] = sa_ld;
        bool last = rr == rounds - 1;
        load_a(it + 1, last ? tq + 1 : tq, last ? 0 : rr + 1);
#if !defined(TF_FAULT_race_no_sync) && !defined(TF_FAULT_race_rows)
        __syncthreads();
#endif
        // The round's partials into each output, in K order: per 128-block, as tf_mma_pipe's closes; RA read ahead of their adds; warps holding no live row skip them.
        if (2 * warp < m) {
#pragma unroll
            for (int i0 = 0; i0 < 8 * P; i0 += RA) {
                float pv[RA], sv[RA];
#pragma unroll
                for (int u = 0; u < RA; ++u) {
                    int i = rev ? 8 * P - 1 - i0 - u : i0 + u;
                    float sa = pt.sas[prow][i / P];
#ifdef TF_FAULT_lost_act_scale
                    sa = 1.0f;
#endif
                    pv[u] = pt.pbuf[i / P][i % P][prow * ROWS_BN + ocol], sv[u] = sa * pt.sws[i][ocol];
                }
#pragma unroll
                for (int u = 0; u < RA; ++u) {
                    int i = rev ? 8 * P - 1 - i0 - u : i0 + u;
                    if (8 * r * P + i < parts) acc = fmaf(pv[u], sv[u], acc);
                }
            }
            // A tile's last round: its outputs out.
            if (last) {
                tf_store_y(y, y_stride, m, n, orow, tile_at(tq) * ROWS_BN + ocol, acc);
                acc = 0.0f;
            }
        }
        // One buffer: nothing is stored for the next round until every add of this one is done; two: the next round stores into the other, last read before this round's barrier.
        if constexpr (NB == 1) __syncthreads();
        if (last)
            rr = 0, ++tq;
        else
            ++rr;
    }
}

// tf_mma_rows_lo for m rows (1 to 8) with only its own shared layout.
template <int FMT, bool OPEN = false>
__device__ __forceinline__ void tf_mma_rows_8(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w, const u8* w_scale,
                                              int col0, float* y, int y_stride, int m, int n, int k) {
    __shared__ TfRowsLoSmem<FMT> sm;
    tf_mma_rows_lo<FMT, OPEN>(sm, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
}

// tf_mma_rows' two shared layouts: 9 to 16 rows, 8 or fewer.
template <int FMT>
union TfRowsShared {
    TfRowsSmem<FMT> hi;
    TfRowsLoSmem<FMT> lo;
};

// tf_mma_rows for m rows (1 to 16): the register-prefetch path where rows 8 to 15 are live, the shared-ring path where they are not.
template <int FMT>
__device__ __forceinline__ void tf_mma_rows_m(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                              const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    __shared__ TfRowsShared<FMT> sm;
    if (m > 8)
        tf_mma_rows<FMT, true>(sm.hi, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
    else
        tf_mma_rows_lo<FMT>(sm.lo, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
}

// tf_mma_rows for m rows (1 to 8) on the register-prefetch path alone: fewer instructions a byte than the ring's in-place permute, for long K.
template <int FMT, bool OPEN = false>
__device__ __forceinline__ void tf_mma_rows_reg8(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                                 const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    __shared__ TfRowsSmem<FMT> sm;
    tf_mma_rows<FMT, false, OPEN>(sm, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
}
