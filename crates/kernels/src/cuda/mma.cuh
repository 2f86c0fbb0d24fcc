// Tensor-core GEMM tiles (mma.sync m16n8k16, f32 accumulators): bf16_gemm's here, fp8_gemm/grouped_proj/mxfp4_gemm's in mma_pipe.cuh; each output element is one fixed chain (32-wide K stages ascending, MMAs into a partial per 128-block, one scaled add; FP4 weights fold their 32-block scales into the f16 values, tf_fold_mul), so its bits depend on neither M, its tile nor the grid.
#define MMA_BM 64
#define MMA_BN 128
#define MMA_BK 32
#define MMA_LD 40
#define MMA_FP8 0
#define MMA_FP4 1

__device__ __forceinline__ u32 tf_smem_addr(const void* p) {
    u32 r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}

// Stores v at y[gm, gn] (row stride y_stride) where that lies inside the m x n output; the planted skip_last_column never writes the last column.
__device__ __forceinline__ void tf_store_y(float* y, int y_stride, int m, int n, int gm, int gn, float v) {
    bool skip = gm >= m || gn >= n;
#ifdef TF_FAULT_skip_last_column
    skip = skip || gn == n - 1;
#endif
    if (!skip) y[(size_t)gm * y_stride + gn] = v;
}

// A tile's activation chunks: row m0 + ar + STEP i of q (clamped into the m rows) from chunk ac, and how much of K up to kend each holds (none outside the matrix).
template <int AP, int STEP = 64>
__device__ __forceinline__ void tf_act_rows(const u16* q, int q_stride, int m, int m0, int ar, int ac, int kend, const u16* (&src)[AP], int (&lim)[AP]) {
#pragma unroll
    for (int i = 0; i < AP; ++i) {
        int gm = m0 + ar + STEP * i;
        src[i] = q + (size_t)min(gm, m - 1) * q_stride + ac * 8;
        lim[i] = gm < m ? kend - ac * 8 : 0;
    }
}

__device__ __forceinline__ void tf_cp_commit() { asm volatile("cp.async.commit_group;"); }

// Asynchronous copy of `bytes` (0..16, the rest zero-filled) from global src into 16 bytes at shared address dst.
__device__ __forceinline__ void tf_cp_async16_at(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void tf_ldmatrix_x4_at(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void tf_ldmatrix_x4(u32* r, const u16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(tf_smem_addr(p)));
}

__device__ __forceinline__ void tf_mma_f16(float* d, const u32* a, const u32* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void tf_mma_bf16(float* d, const u32* a, const u32* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ u32 tf_bf16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ u32 tf_hmul2(u32 a, u32 b) {
    u32 r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// e4m3 bytes 0,1 (sel 0x1404) or 2,3 (sel 0x3424) of x as exact f16x2: the bits placed at value * 2^-8, then times 256.
__device__ __forceinline__ u32 tf_e4m3x2_to_f16x2(u32 x, u32 sel) {
    u32 z;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(z) : "r"(x), "r"(sel));
    return tf_hmul2((z & 0x80008000u) | ((z >> 1) & 0x3f803f80u), 0x5c005c00u);
}

// Byte b (two e2m1 nibbles, low first) as f16x2: the bits placed at value * 2^-14, then times mul (tf_fold_mul's).
__device__ __forceinline__ u32 tf_e2m1x2_to_f16x2_by(u32 b, int swap, u32 mul) {
    u32 p = swap ? ((b >> 4) & 0xfu) | ((b & 0xfu) << 16) : (b & 0xfu) | ((b & 0xf0u) << 12);
    return tf_hmul2(((p & 0x00080008u) << 12) | ((p & 0x00070007u) << 9), mul);
}

// FP4 weights fold their 32-block code c into the f16 values against e, the largest code of their column's 128-block: the f16x2 multiplier 2^(14 - (e - c)) of placed words (value * 2^-14) makes value * 2^(c - e), exact unless c < e - 23 (then rounded to f16); 0 for no code (c < 0) or past 28 steps, where every value rounds to 0.
__device__ __forceinline__ u32 tf_fold_mul(int c, int e) {
    int d = e - c;
    return c >= 0 && d <= 28 ? (u32)(29 - d) * 0x04000400u : 0u;
}

// The largest of the four code bytes of w (a column's 128-block; missing blocks zero).
__device__ __forceinline__ int tf_code_max4(u32 w) {
    u32 m = __vmaxu4(w, w >> 16);
    return (int)(__vmaxu4(m, m >> 8) & 0xffu);
}

// The fold multipliers (tf_fold_mul's) of a column's four 32-block codes c against their largest, m[j] for code byte j, at once; returns that largest.
__device__ __forceinline__ int tf_fold_mul4(u32 c, u32 (&m)[4]) {
    int e = tf_code_max4(c);
    // e - c bytewise (no borrow, e is the largest byte), then at most 29 steps, where the multiplier is 0.
    u32 d = __vminu4((u32)e * 0x01010101u - c, 0x1d1d1d1du);
#pragma unroll
    for (int j = 0; j < 4; ++j) m[j] = (29u - __byte_perm(d, 0u, 0x4440u + j)) * 0x04000400u;
    return e;
}

// f32 of the bf16 pair's low or high half.
__device__ __forceinline__ float tf_bf16_lo(u32 v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float tf_bf16_hi(u32 v) { return __uint_as_float(v & 0xffff0000u); }

// x0, x1 split exactly into three bf16x2 pieces: p[0] = hi, p[1] = mid, p[2] = lo.
__device__ __forceinline__ void tf_bf16_split3(float x0, float x1, u32 p[3]) {
    p[0] = tf_bf16x2(x0, x1);
    float r0 = x0 - tf_bf16_lo(p[0]), r1 = x1 - tf_bf16_hi(p[0]);
    p[1] = tf_bf16x2(r0, r1);
    p[2] = tf_bf16x2(r0 - tf_bf16_lo(p[1]), r1 - tf_bf16_hi(p[1]));
}

// One stage's global data, held in registers while the previous stage computes.
struct TfStage {
    float a[8];
    u32 w[8];
};

// Tiles of y[:, 0..n] (row stride n) from raw f32 rows q (row stride k) and bf16 weights w [n, k]; 256 threads as 2 x 4 warps of 32 x 32.
__device__ __forceinline__ void tf_bf16_tiles(const float* q, const u16* w16, float* y, int m, int n, int k) {
    constexpr int PIECES = 3;
    // One stage buffer: three activation pieces fill 48 KiB of static shared memory (two barriers a stage).
    constexpr int BUFS = 1;
    __shared__ __align__(16) u16 as[BUFS][PIECES][MMA_BM * MMA_LD];
    __shared__ __align__(16) u16 bs[BUFS][MMA_BN * MMA_LD];
    int q_stride = k, y_stride = n;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wm = warp / 4, wn = warp % 4, g = lane / 4, t4 = lane % 4;
    int tiles_m = (m + MMA_BM - 1) / MMA_BM;
    int tiles = tiles_m * ((n + MMA_BN - 1) / MMA_BN);
    int kend = k;
#ifdef TF_FAULT_drop_tail
    kend = k - 1;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK;
    int ar = tid / 4, ac = (tid % 4) * 8;
    int bn = tid / 2, bc = (tid % 2) * 16;
    bool avec = q_stride % 4 == 0 && ((size_t)q % 16) == 0;
    bool wvec = k % 16 == 0 && ((size_t)w16 % 16) == 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        // Row tiles vary fastest, so the blocks running together share their weight columns in L2.
        int m0 = (tile % tiles_m) * MMA_BM, n0 = (tile / tiles_m) * MMA_BN;
        float acc[2][4][4], part[2][4][4];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = part[i][j][e] = 0.0f;
        TfStage st;
        // Global loads of stage s into registers (zeros outside the matrices).
        auto load = [&](int s) {
            int k0 = s * MMA_BK, gm = m0 + ar, gk = k0 + ac;
            const float* qr = q + (size_t)gm * q_stride;
            if (gm < m && avec && gk + 8 <= kend) {
                float4 v0 = *(const float4*)(qr + gk), v1 = *(const float4*)(qr + gk + 4);
                st.a[0] = v0.x, st.a[1] = v0.y, st.a[2] = v0.z, st.a[3] = v0.w;
                st.a[4] = v1.x, st.a[5] = v1.y, st.a[6] = v1.z, st.a[7] = v1.w;
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) st.a[e] = (gm < m && gk + e < kend) ? qr[gk + e] : 0.0f;
            }
            int gn = n0 + bn;
            const u16* wr = w16 + (size_t)gn * k + k0 + bc;
            if (gn < n && wvec && k0 + bc + 16 <= kend) {
                uint4 v0 = *(const uint4*)wr, v1 = *(const uint4*)(wr + 8);
                st.w[0] = v0.x, st.w[1] = v0.y, st.w[2] = v0.z, st.w[3] = v0.w;
                st.w[4] = v1.x, st.w[5] = v1.y, st.w[6] = v1.z, st.w[7] = v1.w;
            } else {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    int kk = k0 + bc + 2 * j;
                    u32 lo = (gn < n && kk < kend) ? wr[2 * j] : 0u;
                    u32 hi = (gn < n && kk + 1 < kend) ? wr[2 * j + 1] : 0u;
                    st.w[j] = lo | (hi << 16);
                }
            }
        };
        // Registers to shared memory, converted to the MMA's input type.
        auto store = [&](int buf) {
            u32 hi[4], mid[4], lo[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                u32 p[3];
                tf_bf16_split3(st.a[2 * j], st.a[2 * j + 1], p);
                hi[j] = p[0], mid[j] = p[1], lo[j] = p[2];
            }
            *(uint4*)&as[buf][0][ar * MMA_LD + ac] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
            *(uint4*)&as[buf][PIECES - 2][ar * MMA_LD + ac] = make_uint4(mid[0], mid[1], mid[2], mid[3]);
            *(uint4*)&as[buf][PIECES - 1][ar * MMA_LD + ac] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
            *(uint4*)&bs[buf][bn * MMA_LD + bc] = make_uint4(st.w[0], st.w[1], st.w[2], st.w[3]);
            *(uint4*)&bs[buf][bn * MMA_LD + bc + 8] = make_uint4(st.w[4], st.w[5], st.w[6], st.w[7]);
        };
        if (stages > 0) {
            load(0);
            store(0);
            __syncthreads();
        }
        for (int s = 0; s < stages; ++s) {
            int cur = s % BUFS;
            if (s + 1 < stages) load(s + 1);
#pragma unroll
            for (int step = 0; step < 2; ++step) {
                int kk = 16 * step;
                u32 b[4][2];
#pragma unroll
                for (int p = 0; p < 2; ++p) {
                    u32 r[4];
                    tf_ldmatrix_x4(r, &bs[cur][(wn * 32 + p * 16 + lane % 8 + 8 * (lane / 16)) * MMA_LD + kk + 8 * ((lane / 8) % 2)]);
                    b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
                }
#pragma unroll
                for (int piece = 0; piece < PIECES; ++piece) {
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) {
                        u32 a[4];
                        tf_ldmatrix_x4(a, &as[cur][piece][(wm * 32 + mi * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * MMA_LD + kk + 8 * (lane / 16)]);
#pragma unroll
                        for (int ni = 0; ni < 4; ++ni) tf_mma_bf16(part[mi][ni], a, b[ni]);
                    }
                }
            }
            // The partial's add, per stage; then a fresh partial.
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                        for (int c = 0; c < 2; ++c) {
                            float* p = &part[mi][ni][2 * h + c];
                            acc[mi][ni][2 * h + c] = acc[mi][ni][2 * h + c] + *p;
                            *p = 0.0f;
                        }
#ifndef TF_FAULT_race_no_sync
            if (BUFS == 1) __syncthreads();
#endif
            if (s + 1 < stages) store((s + 1) % BUFS);
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int gm = m0 + wm * 32 + mi * 16 + g + 8 * h;
#pragma unroll
                for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        int gn = n0 + wn * 32 + ni * 8 + 2 * t4 + c;
                        bool skip = gm >= m || gn >= n;
#ifdef TF_FAULT_skip_last_row
                        skip = skip || gm == m - 1;
#endif
                        if (!skip) y[(size_t)gm * y_stride + gn] = acc[mi][ni][2 * h + c];
                    }
            }
    }
}
