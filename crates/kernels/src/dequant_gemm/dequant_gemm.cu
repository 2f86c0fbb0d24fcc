// dequant_gemm: y = x . W^T with FP8-block or MXFP4 weights decoded exactly, f32 activations, on CUDA cores; 64x64 tiles, K in fixed 32-wide chunks (FMA chain, then one add), one launch per output group.
#define TM 64
#define TN 64
#define TK 32

__device__ __forceinline__ float tf_e2m1_to_f32(u32 code) {
    const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = grid[code & 7u];
    return (code & 8u) ? -v : v;
}

// Byte q of x as tf_e4m3_to_f32 decodes it, without branches: the code's bits at the f32 exponent and mantissa times 2^120 (exact, subnormals too), NaN for 0x7f and 0xff.
__device__ __forceinline__ float tf_e4m3_byte(u32 x, int q) {
    u32 c = (x >> (8 * q)) & 0xffu;
    float v = __uint_as_float(((c & 0x80u) << 24) | ((c & 0x7fu) << 20)) * 0x1p120f;
    return (c & 0x7fu) == 0x7fu ? __int_as_float(0x7fc00000) : v;
}

// Weight row `row` (of the whole matrix), column j, decoded with its scale.
__device__ __forceinline__ float tf_weight(const u8* w, const u8* scales, int fp4, int row, int j, int k) {
    if (fp4) {
        u8 b = w[((size_t)row * k + j) / 2];
        float s = tf_e8m0_to_f32(scales[(size_t)row * (k / 32) + j / 32]);
#ifdef TF_FAULT_lost_scale
        if (j / 32 == k / 32 - 1) s = 1.0f;
#endif
        return tf_e2m1_to_f32((j & 1) ? (u32)(b >> 4) : (u32)(b & 15u)) * s;
    }
    int grid_cols = (k + 127) / 128;
    float s = tf_e8m0_to_f32(scales[(size_t)(row / 128) * grid_cols + j / 128]);
#ifdef TF_FAULT_lost_scale
    if (j / 128 == grid_cols - 1) s = 1.0f;
#endif
    return tf_e4m3_to_f32(w[(size_t)row * k + j]) * s;
}

// Group g: activations x[r, g] (row stride groups * k), weight rows col0 .. col0 + n, output columns col0 .. of y (row stride y_stride).
extern "C" __global__ void __launch_bounds__(256) dequant_gemm(const float* x, const u8* w, const u8* scales, float* y, int m, int n,
                                                              int k, int groups, int g, int y_stride, int fp4) {
    tf_grid_begin();
    __shared__ float xs[TM][TK + 1];
    __shared__ float ws[TN][TK + 1];
    int col0 = g * n;
    int tiles_n = (n + TN - 1) / TN;
    int tiles = tiles_n * ((m + TM - 1) / TM);
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0 = (t / tiles_n) * TM, n0 = (t % tiles_n) * TN;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
        for (int k0 = 0; k0 < k; k0 += TK) {
            for (int i = threadIdx.x; i < TM * TK; i += 256) {
                int r = i / TK, c = i % TK, gm = m0 + r, gk = k0 + c;
                xs[r][c] = (gm < m && gk < k) ? x[((size_t)gm * groups + g) * k + gk] : 0.0f;
            }
            for (int i = threadIdx.x; i < TN * TK; i += 256) {
                int r = i / TK, c = i % TK, gn = n0 + r, gk = k0 + c;
                ws[r][c] = (gn < n && gk < k) ? tf_weight(w, scales, fp4, col0 + gn, gk, k) : 0.0f;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            float part[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) part[i][j] = 0.0f;
            int kn = min(TK, k - k0);
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
                if (!skip && gn < n) y[(size_t)gm * y_stride + col0 + gn] = acc[i][j];
            }
        }
    }
}

// Bytes 0 to 3 of x (e4m3 codes, never NaN) times s, the products tf_e4m3_byte(x, i) * s gives; two conversions to f16 pairs on sm_89 and later.
__device__ __forceinline__ void tf_e4m3x4_scaled(u32 x, float s, float* v) {
#if __CUDA_ARCH__ >= 890
    asm("{.reg .b16 l, h, a, b, c, d;\n\t.reg .b32 lo, hi;\n\tmov.b32 {l, h}, %4;\n\tcvt.rn.f16x2.e4m3x2 lo, l;\n\tcvt.rn.f16x2.e4m3x2 hi, h;\n\t"
        "mov.b32 {a, b}, lo;\n\tmov.b32 {c, d}, hi;\n\tcvt.f32.f16 %0, a;\n\tcvt.f32.f16 %1, b;\n\tcvt.f32.f16 %2, c;\n\tcvt.f32.f16 %3, d;\n\t}"
        : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
        : "r"(x));
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] *= s;
#else
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = tf_e4m3_byte(x, q) * s;
#endif
}

// 16 bytes of read-only global memory, not kept in L1.
__device__ __forceinline__ uint4 tf_ldg16_na(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// The longest K whose activation row dequant_gemm_rows' FP8 path stages in shared memory, and a chunk's floats there (32 and 4 of padding, so a lane's 16-byte reads of its own chunk miss no bank another of 8 lanes hits).
#define XS_MAX_K 8192
#define XS_ROW 36

// dequant_gemm_rows for FP8 weights, K a multiple of 32 up to XS_MAX_K, 16-byte aligned x and w, and each block's 8 columns in one group: a lane's weight words of four of its chunks loaded at once (all of K up to 4096, then kept for every row; the block's first before the grid wait, as the weights are never written), the activation row staged in shared memory by coalesced loads, the same products and chain.
__device__ __forceinline__ void tf_dequant_rows_fp8(const float* x, const u8* w, const u8* scales, float* y, int m, int n, int k, int groups,
                                                    int y_stride) {
    __shared__ __align__(16) float xs[XS_MAX_K / TK * XS_ROW];
    int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int chunks = k / TK, grid_cols = (k + 127) / 128;
    int total = n * groups;
    uint4 ww[4][2];
    float sc[4];
    // Chunks cb + 32 i + lane of column col into ww and sc.
    auto load = [&](int col, int cb) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int c = cb + 32 * i + lane;
            if (c < chunks) {
                const u8* wr = w + (size_t)col * k + c * TK;
                ww[i][0] = tf_ldg16_na(wr), ww[i][1] = tf_ldg16_na(wr + 16);
                sc[i] = tf_e8m0_to_f32(scales[(size_t)(col / 128) * grid_cols + c * TK / 128]);
#ifdef TF_FAULT_lost_scale
                if (c * TK / 128 == grid_cols - 1) sc[i] = 1.0f;
#endif
            }
        }
    };
    int base = blockIdx.x * warps;
    bool held = base < total;
    if (held) load(base + threadIdx.x / 32, 0);
    tf_grid_wait();
    for (; base < total; base += gridDim.x * warps, held = false) {
        int col = base + threadIdx.x / 32, g = base / n;
        for (int r = 0; r < m; ++r) {
            bool skip = false;
#ifdef TF_FAULT_skip_last_row
            skip = r == m - 1;
#endif
            const float4* xr = (const float4*)(x + ((size_t)r * groups + g) * k);
            // Every warp is done with the last row's activations; then this row's, 8 float4 a chunk.
            __syncthreads();
            for (int i = threadIdx.x; i < k / 4; i += blockDim.x) *(float4*)&xs[i / 8 * XS_ROW + 4 * (i % 8)] = __ldg(xr + i);
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            float acc = 0.0f;
#pragma unroll 1
            for (int cb = 0; cb < chunks; cb += 128) {
                if (r == 0 ? !(held && cb == 0) : chunks > 128) load(col, cb);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    int c0 = cb + 32 * i, c = c0 + lane;
                    if (c0 >= chunks) break;
                    float part = 0.0f;
                    if (c < chunks) {
                        const float4* xc = (const float4*)&xs[c * XS_ROW];
                        u32 wv[8] = {ww[i][0].x, ww[i][0].y, ww[i][0].z, ww[i][0].w, ww[i][1].x, ww[i][1].y, ww[i][1].z, ww[i][1].w};
#pragma unroll
                        for (int q = 0; q < 8; ++q) {
                            float4 xq = xc[q];
                            float v[4];
                            tf_e4m3x4_scaled(wv[q], sc[i], v);
                            part = fmaf(xq.x, v[0], part);
                            part = fmaf(xq.y, v[1], part);
                            part = fmaf(xq.z, v[2], part);
                            part = fmaf(xq.w, v[3], part);
                        }
                    }
                    int last = min(32, chunks - c0);
                    for (int j = 0; j < last; ++j) acc += __shfl_sync(0xffffffffu, part, j);
                }
            }
            if (lane == 0 && !skip) y[(size_t)r * y_stride + col] = acc;
        }
    }
}

// Decode rows (m <= 16): a warp per output column of every group, each 32-wide chunk the tiles' FMA chain, chunks joined in the tiles' order.
extern "C" __global__ void __launch_bounds__(256, 4) dequant_gemm_rows(const float* x, const u8* w, const u8* scales, float* y, int m,
                                                                   int n, int k, int groups, int y_stride, int fp4) {
    tf_grid_open();
    if (!fp4 && k % TK == 0 && k <= XS_MAX_K && n % (blockDim.x / 32) == 0 && (((size_t)x | (size_t)w) & 15) == 0) {
        tf_dequant_rows_fp8(x, w, scales, y, m, n, k, groups, y_stride);
        return;
    }
    tf_grid_wait();
    int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int chunks = (k + TK - 1) / TK, grid_cols = (k + 127) / 128;
    int total = n * groups;
    for (int col = blockIdx.x * warps + threadIdx.x / 32; col < total; col += gridDim.x * warps) {
        int g = col / n;
        for (int r = 0; r < m; ++r) {
            bool skip = false;
#ifdef TF_FAULT_skip_last_row
            skip = r == m - 1;
#endif
            const float* xr = x + ((size_t)r * groups + g) * k;
            float acc = 0.0f;
            for (int c0 = 0; c0 < chunks; c0 += 32) {
                int c = c0 + lane;
                float part = 0.0f;
                if (c < chunks) {
                    int k0 = c * TK, kn = min(TK, k - k0);
                    float s;
                    if (fp4) {
                        s = tf_e8m0_to_f32(scales[(size_t)col * (k / 32) + k0 / 32]);
#ifdef TF_FAULT_lost_scale
                        if (k0 / 32 == k / 32 - 1) s = 1.0f;
#endif
                    } else {
                        s = tf_e8m0_to_f32(scales[(size_t)(col / 128) * grid_cols + k0 / 128]);
#ifdef TF_FAULT_lost_scale
                        if (k0 / 128 == grid_cols - 1) s = 1.0f;
#endif
                    }
                    if (fp4) {
                        const u8* wr = w + ((size_t)col * k + k0) / 2;
                        for (int kk = 0; kk < kn; ++kk) {
                            u8 b = wr[kk / 2];
                            float wv = tf_e2m1_to_f32((kk & 1) ? (u32)(b >> 4) : (u32)(b & 15u)) * s;
                            part = fmaf(xr[k0 + kk], wv, part);
                        }
                    } else {
                        const u8* wr = w + (size_t)col * k + k0;
                        const float* xc = xr + k0;
                        if (kn == TK && (((size_t)wr | (size_t)xc) & 15) == 0) {
                            uint4 lo = __ldg((const uint4*)wr), hi = __ldg((const uint4*)wr + 1);
                            u32 ww[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
                            for (int q = 0; q < 8; ++q) {
                                float4 xq = __ldg((const float4*)xc + q);
                                part = fmaf(xq.x, tf_e4m3_byte(ww[q], 0) * s, part);
                                part = fmaf(xq.y, tf_e4m3_byte(ww[q], 1) * s, part);
                                part = fmaf(xq.z, tf_e4m3_byte(ww[q], 2) * s, part);
                                part = fmaf(xq.w, tf_e4m3_byte(ww[q], 3) * s, part);
                            }
                        } else {
                            for (int kk = 0; kk < kn; ++kk) part = fmaf(xc[kk], tf_e4m3_to_f32(wr[kk]) * s, part);
                        }
                    }
                }
                int last = min(32, chunks - c0);
                for (int j = 0; j < last; ++j) acc += __shfl_sync(0xffffffffu, part, j);
            }
            if (lane == 0 && !skip) y[(size_t)r * y_stride + col] = acc;
        }
    }
}
