// cp.async-pipelined tensor-core tiles for fp8_gemm, grouped_proj and mxfp4_gemm: 128- or 64-row by 128-column tiles, each output element one fixed chain (32-wide K stages ascending, two m16n8k16 MMAs a stage into a partial per 128-block, one scaled add), as mma.cuh documents; on sm_90a the same chain by wgmma (wgmma.cuh), whose k16 steps give mma.sync's bits, here only for unaligned FP8 weights (wg_rs.cuh holds the entry and the register-operand ring).
#define PIPE_RING 3
#define PIPE_BM 128

// Waits until at most one of this thread's committed copy groups is still in flight.
__device__ __forceinline__ void tf_cp_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// u16 index of row r, 8-wide chunk c of a 32-wide f16 stage, XOR-swizzled so ldmatrix's eight rows hit distinct banks.
__device__ __forceinline__ int tf_pipe_a(int r, int c) { return r * MMA_BK + ((c ^ ((r >> 1) & 3)) << 3); }

// A 16-byte copy as tf_cp_async16_at, or 16 zero bytes when zero is set.
__device__ __forceinline__ void tf_cp_async16_or_zero(u32 dst, const void* src, bool zero) {
    asm volatile("{ .reg .pred z; setp.ne.b32 z, %2, 0; cp.async.cg.shared.global [%0], [%1], 16, z; }" ::"r"(dst), "l"(src), "r"((int)zero));
}

// tf_mma_f16 into a fresh accumulator: d = a b + 0.
__device__ __forceinline__ void tf_mma_f16_fresh(float* d, const u32* a, const u32* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// The four bytes of x (two e2m1 nibbles each, low first) as f16x2 words, byte i to h[i]: sign and magnitude bits of every nibble placed at once at value * 2^-14, paired by byte, one permute a word against zeros, then times mul (tf_fold_mul's).
__device__ __forceinline__ void tf_e2m1x8_to_f16x2_by(u32 x, int swap, u32 mul, u32* h) {
    if (swap) x = ((x >> 4) & 0x0f0f0f0fu) | ((x << 4) & 0xf0f0f0f0u);
    u32 lo = ((x << 4) & 0x80808080u) | ((x << 1) & 0x0e0e0e0eu), hi = (x & 0x80808080u) | ((x >> 3) & 0x0e0e0e0eu);
    u32 p0 = __byte_perm(lo, hi, 0x5140), p1 = __byte_perm(lo, hi, 0x7362);
    h[0] = tf_hmul2(__byte_perm(p0, 0u, 0x1404), mul), h[1] = tf_hmul2(__byte_perm(p0, 0u, 0x3424), mul);
    h[2] = tf_hmul2(__byte_perm(p1, 0u, 0x1404), mul), h[3] = tf_hmul2(__byte_perm(p1, 0u, 0x3424), mul);
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

// A prompt launch's tiles: one matrix's (BM-row by 128-column tiles of q's m rows against w's n) or, where table is set (entry 2e expert e's weights, 2e + 1 its scales), the tiles of each row group mt[3 i..] (expert, first row, at most BM rows) against its expert's matrix.
struct TfTiles {
    const u16* q;
    int q_stride;
    const float* q_scale;
    int qs_stride;
    const u8* w;
    const u8* w_scale;
    int col0;
    float* y;
    int y_stride, m, n, k;
    const u64* table;
    const int* mt;
    int groups;
};

// One tile: its rows' activations q, q_scale and outputs y (m rows, the tile's from m0), its matrix w, w_scale and first column n0.
struct TfTile {
    const u16* q;
    const float* q_scale;
    const u8* w;
    const u8* w_scale;
    float* y;
    int m, m0, n0;
};

// The tiles of one matrix.
__device__ __forceinline__ TfTiles tf_tiles(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w, const u8* w_scale, int col0,
                                            float* y, int y_stride, int m, int n, int k) {
    return TfTiles{q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k, nullptr, nullptr, 0};
}

// Row tiles of BM rows in T.
template <int BM>
__device__ __forceinline__ int tf_row_tiles(const TfTiles& T) { return T.table ? T.groups : (T.m + BM - 1) / BM; }

// Tile `tile` of T (row tiles vary fastest).
template <int BM>
__device__ __forceinline__ TfTile tf_tile_at(const TfTiles& T, int tile) {
    int tm = tf_row_tiles<BM>(T), mi = tile % tm, n0 = (tile / tm) * MMA_BN;
    if (!T.table) return TfTile{T.q, T.q_scale, T.w, T.w_scale, T.y, T.m, mi * BM, n0};
    int e = T.mt[3 * mi], r0 = T.mt[3 * mi + 1];
    return TfTile{T.q + (size_t)r0 * T.q_stride, T.q_scale + (size_t)r0 * T.qs_stride, (const u8*)T.table[2 * e], (const u8*)T.table[2 * e + 1],
                  T.y + (size_t)r0 * T.y_stride, T.mt[3 * mi + 2], 0, n0};
}

// tf_mma_pipe's tiles of BM rows: 2 x 4 warps of BM/2 x 32 with mma.sync, or (WG, sm_90a) 2 warpgroups of 64 x 128 (BM 128) or 64 x 64 (BM 64) with wgmma, each element the same chain; activations copied two stages ahead, raw weights loaded to registers three ahead and converted once a block into the next stage's buffer; one barrier a stage.
template <int FMT, int BM, bool WG>
__device__ __forceinline__ void tf_mma_pipe_bm(TfPipeSmem& sm, const TfTiles& T) {
    const int q_stride = T.q_stride, qs_stride = T.qs_stride, col0 = T.col0, y_stride = T.y_stride, n = T.n, k = T.k;
    constexpr int MI = BM / 32, AP = BM / 64, NACC = MI * 16;
    constexpr u32 A_SLOT = PIPE_BM * MMA_BK * 2;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wm = warp / 4, wn = warp % 4, g = lane / 4, t4 = lane % 4;
    // WG: warpgroup wm's rows and columns of the tile; its warp wn's 16 rows.
    int wg_row = BM == 128 ? 64 * wm : 0, wg_col = BM == 128 ? 0 : 64 * wm;
    int tiles = tf_row_tiles<BM>(T) * ((n + MMA_BN - 1) / MMA_BN);
    int nblk = (k + 127) / 128;
    int kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * 128;
#endif
    int stages = (kend + MMA_BK - 1) / MMA_BK;
    int ar = tid / 4, ac = tid % 4;
    int bn = tid / 2, bc = (tid % 2) * 16;
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
        const TfTile tl = tf_tile_at<BM>(T, tile);
        const u16* q = tl.q;
        const float* q_scale = tl.q_scale;
        const u8 *w = tl.w, *w_scale = tl.w_scale;
        float* y = tl.y;
        int m = tl.m, m0 = tl.m0, n0 = tl.n0;
        bool wvec = FMT == MMA_FP4 || (k % 16 == 0 && ((size_t)w % 16) == 0);
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
        tf_act_rows<AP>(q, q_stride, m, m0, ar, ac, kend, a_src, a_lim);
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
        // FP4: the largest code of the 128-block that stage s reads in scale row row (its codes past K left out).
        auto block_max = [&](const u8* row, int s) {
            int b0 = order(s) / 4 * 4, e = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (b0 + j < stages) e = max(e, (int)row[b0 + j]);
            return e;
        };
        // The weight scale of column n0 + tid at stage s (threads below MMA_BN): FP4's is its 128-block's largest, as the weights fold their codes against it.
        auto scale = [&](int s) {
            if (s >= stages || tid >= MMA_BN) return 0.0f;
            if constexpr (FMT == MMA_FP8)
                return tf_e8m0_to_f32(s_src[order(s) / 4]);
            else
                return n0 + tid < n ? tf_e8m0_to_f32((u8)block_max(s_src, s)) : 0.0f;
        };
        const u8* c_src = w_scale + (size_t)min(gn, n - 1) * (k / 32);
        // Raw codes v of stage s to f16 weight buffer buf, with the stage's column scales.
        auto convert = [&](const uint4& v, int s, int buf, float sc) {
            u32 h[8];
            if constexpr (FMT == MMA_FP8) {
                u32 wd[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    h[2 * j] = tf_e4m3x2_to_f16x2(wd[j], 0x1404u);
                    h[2 * j + 1] = tf_e4m3x2_to_f16x2(wd[j], 0x3424u);
                }
            } else {
                u32 mul = gn < n ? tf_fold_mul(c_src[order(s)], block_max(c_src, s)) : 0u;
                tf_e2m1x8_to_f16x2_by(v.x, swap, mul, h);
                tf_e2m1x8_to_f16x2_by(v.y, swap, mul, h + 4);
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
            if (s % 4 == 0)
                mmas(true);
            else
                mmas(false);
            if (s + 1 < stages) convert(rn, s + 1, (s + 1) % 2, snext);
            snext = scale(s + 2);
            load_b(s + 3, rn);
#ifdef TF_WGMMA
            // The stage's MMAs are done: partials readable, its buffers free for the refills after the next barrier.
            if constexpr (WG) tf_wg_wait0();
#endif
            // The partial's scaled add, per 128-block; the next block's first stage starts a fresh partial.
            bool close = (s + 1) % 4 == 0 || s + 1 == stages;
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
        convert(r0, 0, 0, scale(0));
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
                tf_store_y(y, y_stride, m, n, m0 + wg_row + 16 * wn + g + 8 * ((i / 2) % 2), n0 + wg_col + 8 * (i / 4) + 2 * t4 + i % 2, acc[i]);
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
                        tf_store_y(y, y_stride, m, n, gm, n0 + wn * 32 + ni * 8 + 2 * t4 + c, acc[16 * mi + 4 * ni + 2 * h + c]);
                    }
            }
    }
}
