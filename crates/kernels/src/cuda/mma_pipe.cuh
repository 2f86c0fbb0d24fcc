// cp.async-pipelined tensor-core tiles for fp8_gemm, grouped_proj and mxfp4_gemm: 128- or 64-row by 128-column tiles, each output element one fixed chain (32-wide K stages ascending, two m16n8k16 MMAs a stage into a per-scale-block partial, one scaled add), as mma.cuh documents; on sm_90a the same chain by wgmma (wgmma.cuh), whose k16 steps give mma.sync's bits.
#define PIPE_RING 3
#define PIPE_BM 128

__device__ __forceinline__ void tf_cp_commit() { asm volatile("cp.async.commit_group;"); }

// Waits until at most one of this thread's committed copy groups is still in flight.
__device__ __forceinline__ void tf_cp_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// u16 index of row r, 8-wide chunk c of a 32-wide f16 stage, XOR-swizzled so ldmatrix's eight rows hit distinct banks.
__device__ __forceinline__ int tf_pipe_a(int r, int c) { return r * MMA_BK + ((c ^ ((r >> 1) & 3)) << 3); }

// f32 to f16 bits, round to nearest (exact for e4m3 grid values).
__device__ __forceinline__ u16 tf_f16(float x) {
    u16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

// Asynchronous copy of `bytes` (0..16, the rest zero-filled) from global src into 16 bytes at shared address dst.
__device__ __forceinline__ void tf_cp_async16_at(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}

// A 16-byte copy as tf_cp_async16_at, or 16 zero bytes when zero is set.
__device__ __forceinline__ void tf_cp_async16_or_zero(u32 dst, const void* src, bool zero) {
    asm volatile("{ .reg .pred z; setp.ne.b32 z, %2, 0; cp.async.cg.shared.global [%0], [%1], 16, z; }" ::"r"(dst), "l"(src), "r"((int)zero));
}

__device__ __forceinline__ void tf_ldmatrix_x4_at(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// tf_mma_f16 into a fresh accumulator: d = a b + 0.
__device__ __forceinline__ void tf_mma_f16_fresh(float* d, const u32* a, const u32* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// The four bytes of x (two e2m1 nibbles each, low first) as the f16x2 words tf_e2m1x2_to_f16x2 makes of them: each byte's nibbles at bits 0 and 16, then sign and magnitude placed at once.
__device__ __forceinline__ void tf_e2m1x8_to_f16x2(u32 x, int swap, u32* h) {
    u32 lo = swap ? x >> 4 : x, hi = swap ? x : x >> 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 p;
        asm("prmt.b32 %0, %1, %2, %3;" : "=r"(p) : "r"(lo), "r"(hi), "r"((u32)(j | j << 4 | (4 + j) << 8 | (4 + j) << 12)));
        p &= 0x000f000fu;
        h[j] = tf_hmul2(((p << 12) | (p << 9)) & 0x8e008e00u, 0x74007400u);
    }
}

// 16 and 8 bytes of read-only global memory.
__device__ __forceinline__ uint4 tf_pipe_ld16(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 tf_pipe_ld8(const void* p) {
    uint2 v;
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// One block's shared memory: the activation copy ring, two stages of f16 weights and their column scales.
struct TfPipeSmem {
    u16 as[PIPE_RING][PIPE_BM * MMA_BK];
    u16 bs[2][MMA_BN * MMA_BK];
    float ss[2][MMA_BN];
};

// tf_mma_pipe's tiles of BM rows: 2 x 4 warps of BM/2 x 32 with mma.sync, or (WG, sm_90a) 2 warpgroups of 64 x 128 (BM 128) or 64 x 64 (BM 64) with wgmma, each element the same chain; activations copied two stages ahead, raw weights loaded to registers three ahead and converted once a block into the next stage's buffer; one barrier a stage.
template <int FMT, int BM, bool WG>
__device__ __forceinline__ void tf_mma_pipe_bm(TfPipeSmem& sm, const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                               const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    constexpr int MI = BM / 32, AP = BM / 64, NACC = MI * 16;
    constexpr u32 A_SLOT = PIPE_BM * MMA_BK * 2;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wm = warp / 4, wn = warp % 4, g = lane / 4, t4 = lane % 4;
    // WG: warpgroup wm's rows and columns of the tile; its warp wn's 16 rows.
    int wg_row = BM == 128 ? 64 * wm : 0, wg_col = BM == 128 ? 0 : 64 * wm;
    int tiles_m = (m + BM - 1) / BM;
    int tiles = tiles_m * ((n + MMA_BN - 1) / MMA_BN);
    int nblk = (k + 127) / 128;
    int kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * 128;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK;
    int ar = tid / 4, ac = tid % 4;
    int bn = tid / 2, bc = (tid % 2) * 16;
    bool wvec = FMT == MMA_FP4 || (k % 16 == 0 && ((size_t)w % 16) == 0);
    int swap = 0;
#ifdef TF_FAULT_swap_nibbles
    swap = 1;
#endif
    // ldmatrix rows and chunks of this lane: A rows (plus 16 mi), B rows (plus 16 p); copy destinations of its A chunks in slot 0.
    int la_row = wm * (BM / 2) + lane % 8 + 8 * ((lane / 8) % 2), la_c = lane / 16;
    int lb_row = wn * 32 + lane % 8 + 8 * (lane / 16), lb_c = (lane / 8) % 2;
    u32 a_dst[AP];
#pragma unroll
    for (int i = 0; i < AP; ++i) a_dst[i] = tf_smem_addr(&sm.as[0][tf_pipe_a(ar + 64 * i, ac)]);
    // Shared byte addresses of this lane's ldmatrix rows at k16 steps 0 and 1 (16 more rows are 1024 bytes on: the swizzle repeats).
    u32 la_at[2], lb_at[2];
#pragma unroll
    for (int step = 0; step < 2; ++step) {
        la_at[step] = tf_smem_addr(&sm.as[0][tf_pipe_a(la_row, 2 * step + la_c)]);
        lb_at[step] = tf_smem_addr(&sm.bs[0][tf_pipe_a(lb_row, 2 * step + lb_c)]);
    }
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        // Row tiles vary fastest, so the blocks running together share their weight columns in L2.
        int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * MMA_BN;
        // Accumulators and partials: mma.sync's (mi, ni, e) at 16 mi + 4 ni + e; wgmma's fragment order (tf_wgmma_n128).
        float acc[NACC], part[NACC];
#pragma unroll
        for (int i = 0; i < NACC; ++i) acc[i] = part[i] = 0.0f;
        // Stage s reads K stage order(s); ascending always (the planted control reverses it in small tiles).
        auto order = [&](int s) {
#ifdef TF_FAULT_order_by_tile
            if (m <= 16) return stages - 1 - s;
#endif
            return s;
        };
        // This thread's A chunk rows (clamped into the matrix) and how much of K each holds; its weight row; its column's scale row.
        const u16* a_src[AP];
        int a_lim[AP];
#pragma unroll
        for (int i = 0; i < AP; ++i) {
            int gm = m0 + ar + 64 * i;
            a_src[i] = q + (size_t)min(gm, m - 1) * q_stride + ac * 8;
            a_lim[i] = gm < m ? kend - ac * 8 : 0;
        }
        int gn = n0 + bn;
        const u8* b_src = FMT == MMA_FP8 ? w + (size_t)min(gn, n - 1) * k + bc : w + (size_t)min(gn, n - 1) * (k / 2) + bc / 2;
        int b_lim = gn < n ? kend - bc : 0;
        int sn = min(n0 + tid, n - 1);
        const u8* s_src = FMT == MMA_FP8 ? w_scale + (size_t)((col0 + sn) / 128) * nblk : w_scale + (size_t)sn * (k / 32);
        int qs_off[MI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int r = WG ? wg_row + 16 * wn + g + 8 * h : wm * (BM / 2) + mi * 16 + g + 8 * h;
                qs_off[mi][h] = min(m0 + r, m - 1) * qs_stride;
            }
        // One copy group: stage s's activations into ring slot s % PIPE_RING (zeros outside the matrix).
        auto issue_a = [&](int s) {
            if (s < stages) {
                int k0 = order(s) * MMA_BK;
                u32 slot = (u32)(s % PIPE_RING) * A_SLOT;
                if (k0 + MMA_BK <= kend) {
#pragma unroll
                    for (int i = 0; i < AP; ++i) tf_cp_async16_or_zero(a_dst[i] + slot, a_src[i] + k0, a_lim[i] <= 0);
                } else {
#pragma unroll
                    for (int i = 0; i < AP; ++i) {
                        int bytes = min(max(a_lim[i] - k0, 0), 8) * 2;
                        tf_cp_async16_at(a_dst[i] + slot, bytes > 0 ? a_src[i] + k0 : q, bytes);
                    }
                }
            }
            tf_cp_commit();
        };
        // Stage s's raw weight codes of this thread (zeros outside the matrix or past the last stage).
        auto load_b = [&](int s, uint4& v) {
            v = make_uint4(0u, 0u, 0u, 0u);
            if (s >= stages) return;
            int k0 = order(s) * MMA_BK;
            if constexpr (FMT == MMA_FP8) {
                int bytes = min(max(b_lim - k0, 0), 16);
                if (bytes == 16 && wvec) {
                    v = tf_pipe_ld16(b_src + k0);
                } else {
                    u32 word[4] = {0u, 0u, 0u, 0u};
#pragma unroll
                    for (int b = 0; b < 16; ++b)
                        if (b < bytes) word[b / 4] |= (u32)b_src[k0 + b] << (8 * (b % 4));
                    v = make_uint4(word[0], word[1], word[2], word[3]);
                }
            } else {
                if (gn < n) {
                    uint2 x = tf_pipe_ld8(b_src + k0 / 2);
                    v.x = x.x, v.y = x.y;
                }
            }
        };
        // The weight scale of column n0 + tid at stage s (threads below MMA_BN).
        auto scale = [&](int s) {
            if (s >= stages || tid >= MMA_BN) return 0.0f;
            s = order(s);
            if constexpr (FMT == MMA_FP8)
                return tf_e8m0_to_f32(s_src[s / 4]);
            else
                return n0 + tid < n ? tf_e8m0_to_f32(s_src[s]) : 0.0f;
        };
        // Raw codes v of a stage to f16 weight buffer buf, with the stage's column scales.
        auto convert = [&](const uint4& v, int buf, float sc) {
            u32 h[8];
            if constexpr (FMT == MMA_FP8) {
                u32 wd[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    h[2 * j] = tf_e4m3x2_to_f16x2(wd[j], 0x1404u);
                    h[2 * j + 1] = tf_e4m3x2_to_f16x2(wd[j], 0x3424u);
                }
            } else {
                tf_e2m1x8_to_f16x2(v.x, swap, h);
                tf_e2m1x8_to_f16x2(v.y, swap, h + 4);
            }
            if (tid < MMA_BN) sm.ss[buf][tid] = sc;
            *(uint4*)&sm.bs[buf][tf_pipe_a(bn, bc / 8)] = make_uint4(h[0], h[1], h[2], h[3]);
            *(uint4*)&sm.bs[buf][tf_pipe_a(bn, bc / 8 + 1)] = make_uint4(h[4], h[5], h[6], h[7]);
        };
        // Activation scales of this thread's rows for the 128-block a stage reads, loaded at the block's first stage.
        float sa[MI][2];
        // Stage s: its activations have landed; copy s + 2, MMA s, convert s + 1 (raw codes in rn, then refilled with s + 3), close s.
        auto body = [&](int s, uint4& rn, float& snext) {
            if (s >= stages) return;
            tf_cp_wait1();
#ifdef TF_WGMMA
            // The landed copies and the converted weights, visible to the tensor cores' reads.
            if constexpr (WG) tf_fence_async_smem();
#endif
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            issue_a(s + 2);
            if (s % 4 == 0) {
                int kb = order(s) / 4;
#pragma unroll
                for (int mi = 0; mi < (WG ? 1 : MI); ++mi)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        sa[mi][h] = q_scale[qs_off[mi][h] + kb];
#ifdef TF_FAULT_lost_act_scale
                        sa[mi][h] = 1.0f;
#endif
                    }
            }
            u32 a_slot = (u32)(s % PIPE_RING) * A_SLOT, b_buf = (u32)(s % 2) * (MMA_BN * MMA_BK * 2);
            // The stage's two k16 steps; a block's first stage starts its partials afresh (the same as adding to zeros).
            auto mmas = [&](bool fresh) {
#ifdef TF_WGMMA
                if constexpr (WG) {
                    u32 a_at = tf_smem_addr(&sm.as[0][0]) + a_slot + 64 * wg_row, b_at = tf_smem_addr(&sm.bs[0][0]) + b_buf + 64 * wg_col;
                    tf_wg_arrive();
#pragma unroll
                    for (int step = 0; step < 2; ++step) {
                        int keep = !(fresh && step == 0);
                        if constexpr (BM == 128)
                            tf_wgmma_n128(part, tf_wg_desc(a_at + 32 * step), tf_wg_desc(b_at + 32 * step), keep);
                        else
                            tf_wgmma_n64(part, tf_wg_desc(a_at + 32 * step), tf_wg_desc(b_at + 32 * step), keep);
                    }
                    tf_wg_commit();
                    return;
                }
#endif
#pragma unroll
                for (int step = 0; step < 2; ++step) {
                    u32 b[4][2];
#pragma unroll
                    for (int p = 0; p < 2; ++p) {
                        u32 r[4];
                        tf_ldmatrix_x4_at(r, lb_at[step] + b_buf + 1024 * p);
                        b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
                    }
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi) {
                        u32 a[4];
                        tf_ldmatrix_x4_at(a, la_at[step] + a_slot + 1024 * mi);
#pragma unroll
                        for (int ni = 0; ni < 4; ++ni) {
                            if (fresh && step == 0)
                                tf_mma_f16_fresh(&part[16 * mi + 4 * ni], a, b[ni]);
                            else
                                tf_mma_f16(&part[16 * mi + 4 * ni], a, b[ni]);
                        }
                    }
                }
            };
            if (FMT != MMA_FP8 || s % 4 == 0)
                mmas(true);
            else
                mmas(false);
            if (s + 1 < stages) convert(rn, (s + 1) % 2, snext);
            snext = scale(s + 2);
            load_b(s + 3, rn);
#ifdef TF_WGMMA
            // The stage's MMAs are done: partials readable, its buffers free for the refills after the next barrier.
            if constexpr (WG) tf_wg_wait0();
#endif
            // The partial's scaled add: per 128-block (FP8), per 32-block (FP4); the next block's first stage starts a fresh partial.
            bool close = FMT != MMA_FP8 || (s + 1) % 4 == 0 || s + 1 == stages;
            if (close) {
                if constexpr (WG) {
#pragma unroll
                    for (int i = 0; i < NACC; ++i) {
                        float sw = sm.ss[s % 2][wg_col + 8 * (i / 4) + 2 * t4 + i % 2];
                        acc[i] = fmaf(part[i], sa[0][(i / 2) % 2] * sw, acc[i]);
                    }
                    return;
                }
#pragma unroll
                for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        float sw = sm.ss[s % 2][wn * 32 + ni * 8 + 2 * t4 + c];
#pragma unroll
                        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                            for (int h = 0; h < 2; ++h)
                                acc[16 * mi + 4 * ni + 2 * h + c] = fmaf(part[16 * mi + 4 * ni + 2 * h + c], sa[mi][h] * sw, acc[16 * mi + 4 * ni + 2 * h + c]);
                    }
            }
        };
        issue_a(0);
        issue_a(1);
        uint4 r0, r1;
        load_b(0, r0);
        convert(r0, 0, scale(0));
        load_b(1, r0);
        load_b(2, r1);
        float snext = scale(1);
        // Raw codes of stage s + 1 sit in r0 at even s, r1 at odd s.
        for (int s = 0; s < stages; s += 2) {
            body(s, r0, snext);
            body(s + 1, r1, snext);
        }
        // Every warp is done with the buffers before the next tile's prologue refills them.
        __syncthreads();
        if constexpr (WG) {
#pragma unroll
            for (int i = 0; i < NACC; ++i) {
                int gm = m0 + wg_row + 16 * wn + g + 8 * ((i / 2) % 2), gn = n0 + wg_col + 8 * (i / 4) + 2 * t4 + i % 2;
                bool skip = gm >= m || gn >= n;
#ifdef TF_FAULT_skip_last_column
                skip = skip || gn == n - 1;
#endif
                if (!skip) y[(size_t)gm * y_stride + gn] = acc[i];
            }
            continue;
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int gm = m0 + wm * (BM / 2) + mi * 16 + g + 8 * h;
#pragma unroll
                for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        int gn = n0 + wn * 32 + ni * 8 + 2 * t4 + c;
                        bool skip = gm >= m || gn >= n;
#ifdef TF_FAULT_skip_last_column
                        skip = skip || gn == n - 1;
#endif
                        if (!skip) y[(size_t)gm * y_stride + gn] = acc[16 * mi + 4 * ni + 2 * h + c];
                    }
            }
    }
}

// Tiles of y[:, 0..n] (row stride y_stride) from f16 e4m3-grid rows q (row stride q_stride, a multiple of 8; a scale a 128 in q_scale) and weights w[0..n] (FP8 rows of k codes with 128x128 scales from row col0, or FP4 rows of k/2 bytes with per-32 scales): 128-row tiles when they fill the GPU in fewer rounds, else 64.
template <int FMT>
__device__ __forceinline__ void tf_mma_pipe(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                            const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    // 1024-byte aligned: every stage buffer starts a 64-byte-swizzle atom, as wgmma's descriptors need.
    __shared__ __align__(1024) TfPipeSmem sm;
#ifdef TF_WGMMA
    constexpr bool WG = true;
#else
    constexpr bool WG = false;
#endif
    u32 sms;
    asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
    long tiles_n = (n + MMA_BN - 1) / MMA_BN;
    long rounds128 = (tiles_n * ((m + 127) / 128) + sms - 1) / sms, rounds64 = (tiles_n * ((m + 63) / 64) + sms - 1) / sms;
    if (5 * rounds128 <= 3 * rounds64)
        tf_mma_pipe_bm<FMT, 128, WG>(sm, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
    else
        tf_mma_pipe_bm<FMT, 64, WG>(sm, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
}

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

// tf_mma_rows' shared memory, one layout for both of its row counts.
template <int FMT>
struct TfRowsSmem {
    static constexpr int P = FMT == MMA_FP8 ? 1 : 4, WROW = FMT == MMA_FP8 ? 128 : 64;
    float pbuf[8][P][ROWS_MAX * ROWS_BN];
    __align__(16) u8 wst[8][ROWS_BN * WROW];
    float sws[8 * P][ROWS_BN];
    float sas[ROWS_MAX][8];
};

// Up to 16 rows (decode; HI: rows 8 to 15 may be live) as tf_mma_pipe computes them, in 16-column tiles: warp w makes the partials of 128-wide K chunks w, w + 8, ... (weights in 16-byte loads D rounds ahead, to B fragments through the warp's own shared rows), then the threads of live rows add them in K order.
template <int FMT, bool HI>
__device__ __forceinline__ void tf_mma_rows(TfRowsSmem<FMT>& sm, const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                            const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    // Partials a chunk: one per 128-block (FP8), one per 32-block (FP4).
    constexpr int P = FMT == MMA_FP8 ? 1 : 4;
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
    int parts = FMT == MMA_FP8 ? chunks : stages;
    bool rev = false;
#ifdef TF_FAULT_order_by_tile
    rev = true;
#endif
    int swap = 0;
#ifdef TF_FAULT_swap_nibbles
    swap = 1;
#endif
    size_t wstride = FMT == MMA_FP8 ? (size_t)k : (size_t)(k / 2);
    bool vec = wstride % 16 == 0 && ((size_t)w % 16) == 0;
    int orow = tid / ROWS_BN, ocol = tid % ROWS_BN;
    // Piece p of a lane: row pr(p), 16 bytes at pk(p) of the chunk's row (FP8: 8 lanes a row; FP4: 4 lanes a row).
    auto pr = [&](int p) { return FMT == MMA_FP8 ? 4 * p + lane / 8 : 8 * p + lane / 4; };
    auto pk = [&](int p) { return FMT == MMA_FP8 ? lane % 8 : lane % 4; };
    u8* ws = wst[warp];
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
                uint4 x = wp[p], o;
                if constexpr (FMT == MMA_FP8) {
                    // Word t4 holds k pairs 2 t4 and 8 + 2 t4: b0 and b1 of lane t4.
                    o.x = __byte_perm(x.x, x.z, 0x5410), o.y = __byte_perm(x.x, x.z, 0x7632);
                    o.z = __byte_perm(x.y, x.w, 0x5410), o.w = __byte_perm(x.y, x.w, 0x7632);
                    *(uint4*)&ws[row * WROW + ((v ^ (row & 7)) << 4)] = o;
                } else {
                    // Word t4 holds bytes t4, t4 + 4, t4 + 8, t4 + 12: lane t4's (j, h) = (0, 0), (0, 1), (1, 0), (1, 1) of the piece.
                    u32 a = __byte_perm(x.x, x.y, 0x5140), b = __byte_perm(x.z, x.w, 0x5140);
                    u32 c = __byte_perm(x.x, x.y, 0x7362), d = __byte_perm(x.z, x.w, 0x7362);
                    o.x = __byte_perm(a, b, 0x5410), o.y = __byte_perm(a, b, 0x7632);
                    o.z = __byte_perm(c, d, 0x5410), o.w = __byte_perm(c, d, 0x7632);
                    *(uint4*)&ws[row * WROW + ((v ^ ((row >> 1) & 3)) << 4)] = o;
                }
            }
        };
        // Activations and scales of round rr (zeros past the last round), loaded a round ahead of their use.
        constexpr int NS = (8 * P * ROWS_BN + 255) / 256;
        u32 af[8][4];
        float sw_ld[NS], sa_ld;
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
                                              : tf_e8m0_to_f32(w_scale[(size_t)gn * (k / 32) + t]);
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
                    constexpr int PD = FMT == MMA_FP8 ? 8 : 2;
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) {
                        u32 b[2];
                        if constexpr (FMT == MMA_FP8) {
                            tf_rows_e4m3x4(bw[j / 2][ni + 2 * (j % 2)], b);
                        } else {
                            u32 x = bw[j / 4][ni + 2 * ((j / 2) % 2)] >> (16 * (j % 2));
                            b[0] = tf_e2m1x2_to_f16x2(x & 0xffu, swap), b[1] = tf_e2m1x2_to_f16x2((x >> 8) & 0xffu, swap);
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
            // The round's partials into each output, in K order: per 128-block (FP8) or 32-block (FP4), as tf_mma_pipe's closes; eight read ahead of their adds; warps holding no live row skip them.
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
        load_a(0);
        for (int rb = 0; rb < rounds; rb += D)
#pragma unroll
            for (int d = 0; d < D; ++d) round(rb + d, wb[d]);
        bool skip = orow >= m || n0 + ocol >= n;
#ifdef TF_FAULT_skip_last_column
        skip = skip || n0 + ocol == n - 1;
#endif
        if (!skip) y[(size_t)orow * y_stride + n0 + ocol] = acc;
    }
}

// tf_mma_rows for m rows (1 to 16): the code for rows 8 to 15 only where m needs it, one shared layout for both.
template <int FMT>
__device__ __forceinline__ void tf_mma_rows_m(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                              const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    __shared__ TfRowsSmem<FMT> sm;
    if (m > 8)
        tf_mma_rows<FMT, true>(sm, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
    else
        tf_mma_rows<FMT, false>(sm, q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k);
}
