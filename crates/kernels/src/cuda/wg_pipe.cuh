// The prompt tiles' sm_90a deep ring: tf_mma_pipe_bm's chains by wgmma, a stage WG_SUB 32-wide sub-stages, activations and raw weight codes copied WG_RING - 1 stages ahead into dynamic shared memory.
#ifndef WG_RING
#define WG_RING 3
#endif
#ifndef WG_SUB
#define WG_SUB 4
#endif
static_assert(WG_RING >= 3, "a stage converts the next stage's raw codes, copied at least a stage before");
static_assert(WG_SUB == 4, "a raw stage row is 8 (FP8) or 4 (FP4) swizzled 16-byte chunks");

// The deep ring's shared memory: activation stages, raw weight stages (tf_wg_raw's layout), two converted f16 weight stages and their column scales; every f16 sub-stage buffer in tf_pipe_a's layout.
struct TfWgSmem {
    u16 as[WG_RING][WG_SUB][PIPE_BM * MMA_BK];
    u16 bs[2][WG_SUB][MMA_BN * MMA_BK];
    u8 raw[WG_RING][WG_SUB * MMA_BN * 32];
    float ss[2][WG_SUB][MMA_BN];
};

// Bytes of dynamic shared memory the sm_90a prompt entries need (the deep ring or, for unaligned weights, tf_mma_pipe_bm's buffers).
#define TF_PIPE_DYN_BYTES (sizeof(TfWgSmem) > sizeof(TfPipeSmem) ? sizeof(TfWgSmem) : sizeof(TfPipeSmem))

// Byte offset in a raw stage of column r's 16-byte chunk c (FP8: 8 a column, c = 2 x sub-stage + half; FP4: 4, c = sub-stage): swizzled so one column's chunks and four columns' chunks at one c each fill distinct banks.
template <int FMT>
__device__ __forceinline__ u32 tf_wg_raw(int r, int c) {
    if constexpr (FMT == MMA_FP8) return r * 128 + ((c ^ (r & 7)) << 4);
    return r * 64 + ((c ^ ((r >> 1) & 3)) << 4);
}

#ifdef TF_WGMMA
// A 16-byte copy from global src to shared dst.
__device__ __forceinline__ void tf_cp_async16(u32 dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}

// An 8-byte copy of `bytes` (0 or 8) from global src to shared dst, zeros when 0.
__device__ __forceinline__ void tf_cp_async8_at(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}

// tf_mma_pipe_bm's WG tiles, the same chains (32-wide sub-stages u ascending) with WG_SUB sub-stages a barrier and every copy WG_RING - 1 stages ahead, queued behind the stage's MMAs; raw codes are converted a stage before their use, after the barrier that lands them.
template <int FMT, int BM>
__device__ __forceinline__ void tf_wg_pipe_bm(TfWgSmem& sm, const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                              const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    constexpr int AP = BM / 64, NACC = BM / 2, H = WG_SUB;
    constexpr u32 A_SUB = PIPE_BM * MMA_BK * 2;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wm = warp / 4, wn = warp % 4, g = lane / 4, t4 = lane % 4;
    int wg_row = BM == 128 ? 64 * wm : 0, wg_col = BM == 128 ? 0 : 64 * wm;
    int tiles_m = (m + BM - 1) / BM;
    int tiles = tiles_m * ((n + MMA_BN - 1) / MMA_BN);
    int nblk = (k + 127) / 128;
    int kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * 128;
#endif
    int subs = (kend + MMA_BK - 1) / MMA_BK, stages = (subs + H - 1) / H;
    int ar = tid / 4, ac = tid % 4;
    int bn = tid / 2, bc = (tid % 2) * 16;
    int swap = tf_fault_swap();
    u32 a_dst[AP];
#pragma unroll
    for (int i = 0; i < AP; ++i) a_dst[i] = tf_smem_addr(&sm.as[0][0][tf_pipe_a(ar + 64 * i, ac)]);
    // This thread's raw chunk of sub-stage j, the one it converts: FP8 column bn's 16 codes from bc, FP4 its 8 bytes from bc / 2.
    auto raw_off = [&](int j) { return FMT == MMA_FP8 ? tf_wg_raw<FMT>(bn, 2 * j + bc / 16) : tf_wg_raw<FMT>(bn, j) + bc / 2; };
    constexpr u32 RAW_STAGE = WG_SUB * MMA_BN * 32;
    u32 raw0 = tf_smem_addr(&sm.raw[0][0]);
    // Whole-tile copies: FP8 column (tid / 8) + 32 i, chunk tid % 8 (a 128-byte line a column); FP4 column (tid / 4) + 64 i, chunk (sub-stage) tid % 4.
    constexpr int RAW_COPIES = FMT == MMA_FP8 ? 4 : 2, RAW_ROWS = FMT == MMA_FP8 ? 32 : 64, RAW_ROW = FMT == MMA_FP8 ? 128 : 64;
    int rc = FMT == MMA_FP8 ? tid % 8 : tid % 4, rr = FMT == MMA_FP8 ? tid / 8 : tid / 4;
    u32 raw_whole = raw0 + tf_wg_raw<FMT>(rr, rc);
    // FP8: descriptors of this warpgroup's rows of activation sub-stage 0 and columns of weight sub-stage 0 (every other sub-stage an offset on).
    constexpr u32 B_SUB = MMA_BN * MMA_BK * 2;
    u64 da0 = tf_wg_desc(tf_smem_addr(&sm.as[0][0][0]) + 64 * wg_row), db0 = tf_wg_desc(tf_smem_addr(&sm.bs[0][0][0]) + 64 * wg_col);
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * MMA_BN;
        float acc[NACC], part[NACC];
#pragma unroll
        for (int i = 0; i < NACC; ++i) acc[i] = part[i] = 0.0f;
        // Sub-stage u reads K sub-stage order(u); ascending always (the planted control reverses it in small tiles).
        auto order = [&](int u) {
#ifdef TF_FAULT_order_by_tile
            if (m <= 16) return subs - 1 - u;
#endif
            return u;
        };
        const u16* a_src[AP];
        int a_lim[AP];
        tf_act_rows<AP>(q, q_stride, m, m0, ar, ac, kend, a_src, a_lim);
        int gn = n0 + bn;
        const u8* b_src = FMT == MMA_FP8 ? w + (size_t)min(gn, n - 1) * k + bc : w + (size_t)min(gn, n - 1) * (k / 2) + bc / 2;
        const u8* bw_src = FMT == MMA_FP8 ? w + (size_t)(n0 + rr) * k + (rc % 2) * 16 : w + (size_t)(n0 + rr) * (k / 2);
        int b_lim = gn < n ? kend - bc : 0;
        int sn = min(n0 + tid, n - 1);
        const u8* s_src = FMT == MMA_FP8 ? w_scale + (size_t)((col0 + sn) / 128) * nblk : w_scale + (size_t)sn * (k / 32);
        int qs_off[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) qs_off[h] = min(m0 + wg_row + 16 * wn + g + 8 * h, m - 1) * qs_stride;
        // A tile wholly inside the matrix, K whole sub-stages: every copy full.
        bool inside = m0 + BM <= m && n0 + MMA_BN <= n && kend % MMA_BK == 0;
        // One copy group: stage s's activations and this thread's raw weight codes into ring slot s % WG_RING (zeros outside the matrix).
        auto issue = [&](int s) {
            if (inside && (s + 1) * H <= subs) {
#pragma unroll
                for (int j = 0; j < H; ++j) {
                    int k0 = order(s * H + j) * MMA_BK;
                    u32 sub = (u32)((s % WG_RING) * H + j);
#pragma unroll
                    for (int i = 0; i < AP; ++i) tf_cp_async16(a_dst[i] + sub * A_SUB, a_src[i] + k0);
                }
                int rk = FMT == MMA_FP8 ? order(s * H + rc / 2) * MMA_BK : order(s * H + rc) * (MMA_BK / 2);
                size_t row_bytes = FMT == MMA_FP8 ? k : k / 2;
#pragma unroll
                for (int i = 0; i < RAW_COPIES; ++i)
                    tf_cp_async16(raw_whole + (s % WG_RING) * RAW_STAGE + i * RAW_ROWS * RAW_ROW, bw_src + i * RAW_ROWS * row_bytes + rk);
                tf_cp_commit();
                return;
            }
#pragma unroll
            for (int j = 0; j < H; ++j) {
                int u = s * H + j;
                if (u >= subs) break;
                int k0 = order(u) * MMA_BK;
                u32 sub = (u32)((s % WG_RING) * H + j);
                if (k0 + MMA_BK <= kend) {
#pragma unroll
                    for (int i = 0; i < AP; ++i) tf_cp_async16_or_zero(a_dst[i] + sub * A_SUB, a_src[i] + k0, a_lim[i] <= 0);
                } else {
#pragma unroll
                    for (int i = 0; i < AP; ++i) {
                        int bytes = min(max(a_lim[i] - k0, 0), 8) * 2;
                        tf_cp_async16_at(a_dst[i] + sub * A_SUB, bytes > 0 ? a_src[i] + k0 : q, bytes);
                    }
                }
                u32 raw_dst = raw0 + (s % WG_RING) * RAW_STAGE + raw_off(j);
                if constexpr (FMT == MMA_FP8) {
                    int bytes = min(max(b_lim - k0, 0), 16);
                    tf_cp_async16_at(raw_dst, bytes > 0 ? b_src + k0 : w, bytes);
                } else {
                    tf_cp_async8_at(raw_dst, gn < n ? b_src + k0 / 2 : w, gn < n ? 8 : 0);
                }
            }
            tf_cp_commit();
        };
        // Scale codes of the next stage to convert, loaded a stage ahead and decoded at their use (-1 past K or the matrix): FP8 column n0 + tid's (threads below MMA_BN), FP4 this thread's column n0 + bn.
        int scode[H];
        const u8* c_src = w_scale + (size_t)min(gn, n - 1) * (k / 32);
        auto load_scales = [&](int s) {
#pragma unroll
            for (int j = 0; j < H; ++j) {
                int u = s * H + j;
                if constexpr (FMT == MMA_FP8)
                    scode[j] = u < subs && tid < MMA_BN ? s_src[order(u) / 4] : -1;
                else
                    scode[j] = u < subs && gn < n ? c_src[order(u)] : -1;
            }
        };
        // This thread's landed raw codes of stage s to f16 weight buffer buf, with the stage's column scales (scode, then refilled for stage s + 1).
        auto convert = [&](int s, int buf) {
            const u8* raw = &sm.raw[s % WG_RING][0];
            if constexpr (FMT == MMA_FP8) {
                // Warpgroup 0 converts the whole stage, column tid, while warpgroup 1's MMAs run.
                if (tid >= MMA_BN) return;
                uint4 v8[4];
#pragma unroll
                for (int j = 0; j < H; ++j) {
                    // Two sub-stages' loads at a time.
                    if (j % 2 == 0) {
#pragma unroll
                        for (int c = 0; c < 4; ++c) v8[c] = *(const uint4*)(raw + tf_wg_raw<FMT>(tid, 2 * j + c));
                    }
#pragma unroll
                    for (int half = 0; half < 2; ++half) {
                        uint4 v = v8[2 * (j % 2) + half];
                        u32 wd[4] = {v.x, v.y, v.z, v.w}, h[8];
#pragma unroll
                        for (int e = 0; e < 4; ++e) tf_rows_e4m3x4(wd[e], h + 2 * e);
                        *(uint4*)&sm.bs[buf][j][tf_pipe_a(tid, 2 * half)] = make_uint4(h[0], h[1], h[2], h[3]);
                        *(uint4*)&sm.bs[buf][j][tf_pipe_a(tid, 2 * half + 1)] = make_uint4(h[4], h[5], h[6], h[7]);
                    }
                    sm.ss[buf][j][tid] = scode[j] >= 0 ? tf_e8m0_to_f32((u8)scode[j]) : 0.0f;
                }
                load_scales(s + 1);
                return;
            }
            // Every chunk's load first, so the conversions wait on one shared-memory round trip.
            uint2 v4[H];
#pragma unroll
            for (int j = 0; j < H; ++j) v4[j] = *(const uint2*)(raw + raw_off(j));
            // A stage is one 128-block: each 32-block folds its code against the block's largest (tf_fold_mul), whose scale closes the block.
            int e = -1;
#pragma unroll
            for (int j = 0; j < H; ++j) e = max(e, scode[j]);
#pragma unroll
            for (int j = 0; j < H; ++j) {
                u32 h[8], mul = tf_fold_mul(scode[j], e);
                tf_e2m1x8_to_f16x2_by(v4[j].x, swap, mul, h);
                tf_e2m1x8_to_f16x2_by(v4[j].y, swap, mul, h + 4);
                *(uint4*)&sm.bs[buf][j][tf_pipe_a(bn, bc / 8)] = make_uint4(h[0], h[1], h[2], h[3]);
                *(uint4*)&sm.bs[buf][j][tf_pipe_a(bn, bc / 8 + 1)] = make_uint4(h[4], h[5], h[6], h[7]);
            }
            if (bc == 0) sm.ss[buf][0][bn] = e >= 0 ? tf_e8m0_to_f32((u8)e) : 0.0f;
            load_scales(s + 1);
        };
        // Sub-stage j of stage s's two k16 steps into part (afresh at a scale block's first), issued and committed.
        auto mmas = [&](int s, int j, bool fresh) {
            auto wg = [&](u64 da, u64 db, int keep) {
                if constexpr (BM == 128)
                    tf_wgmma_n128(part, da, db, keep);
                else
                    tf_wgmma_n64(part, da, db, keep);
            };
            if constexpr (FMT == MMA_FP8) {
                // A descriptor's start field counts 16-byte units, so an offset within the ring adds to it directly.
                u64 da = da0 + (u64)((s % WG_RING) * H + j) * (A_SUB / 16), db = db0 + (u64)((s % 2) * H + j) * (B_SUB / 16);
#pragma unroll
                for (int step = 0; step < 2; ++step) wg(da + 2 * step, db + 2 * step, !(fresh && step == 0));
            } else {
                u32 a_at = tf_smem_addr(&sm.as[s % WG_RING][j][0]) + 64 * wg_row, b_at = tf_smem_addr(&sm.bs[s % 2][j][0]) + 64 * wg_col;
#pragma unroll
                for (int step = 0; step < 2; ++step) wg(tf_wg_desc(a_at + 32 * step), tf_wg_desc(b_at + 32 * step), !(fresh && step == 0));
            }
        };
        // part's scaled add into acc with sub-stage j's column scales of buffer buf.
        auto close = [&](int buf, int j, const float* sa) {
            if (FMT == MMA_FP8 && col0 % 128 == 0) {
                // The tile's columns share one 128-block, so one weight scale.
                float sw = sm.ss[buf][j][0], f0 = sa[0] * sw, f1 = sa[1] * sw;
#pragma unroll
                for (int i = 0; i < NACC; ++i) acc[i] = fmaf(part[i], (i / 2) % 2 ? f1 : f0, acc[i]);
                return;
            }
#pragma unroll
            for (int i = 0; i < NACC; ++i) {
                float sw = sm.ss[buf][j][wg_col + 8 * (i / 4) + 2 * t4 + i % 2];
                acc[i] = fmaf(part[i], sa[(i / 2) % 2] * sw, acc[i]);
            }
        };
        float sa[2];
        auto load_sa = [&](int u) {
            int kb = order(u) / 4;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                sa[h] = q_scale[qs_off[h] + kb];
#ifdef TF_FAULT_lost_act_scale
                sa[h] = 1.0f;
#endif
            }
        };
#pragma unroll
        for (int i = 0; i < WG_RING - 1; ++i) issue(i);
        tf_cp_wait<WG_RING - 2>();
        // Threads convert raw chunks that others copied.
        __syncthreads();
        load_scales(0);
        convert(0, 0);
        for (int s = 0; s < stages; ++s) {
            // Groups up to s + 1 have landed: stage s's activations and stage s + 1's raw codes.
            tf_cp_wait<WG_RING - 3>();
            tf_fence_async_smem();
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            if constexpr (FMT == MMA_FP8) {
                // A stage's sub-stages chain into part as one group, back to back (no branch between them, so no fence is injected); a 128-block closes after its fourth.
                // Warpgroup 1 queues its copies first, so warpgroup 0's MMAs go first and it converts while warpgroup 1's run.
                if (wm == 1) {
                    issue(s + WG_RING - 1);
                    if (s * H % 4 == 0) load_sa(s * H);
                }
                // Each path commits its own group, so no commit waits at the join behind the MMAs.
                tf_wg_arrive();
                if ((s + 1) * H <= subs) {
#pragma unroll
                    for (int j = 0; j < H; ++j) mmas(s, j, (s * H + j) % 4 == 0);
                    tf_wg_commit();
                } else {
#pragma unroll
                    for (int j = 0; j < H; ++j)
                        if (s * H + j < subs) mmas(s, j, (s * H + j) % 4 == 0);
                    tf_wg_commit();
                }
                // Warpgroup 0's copies and scale loads queue behind its MMAs, not in front of them.
                if (wm == 0) {
                    issue(s + WG_RING - 1);
                    if (s * H % 4 == 0) load_sa(s * H);
                }
                if (s + 1 < stages) convert(s + 1, (s + 1) % 2);
                tf_wg_wait0();
#pragma unroll
                for (int j = 0; j < H; ++j) {
                    int u = s * H + j;
                    if (u < subs && ((u + 1) % 4 == 0 || u + 1 == subs)) close(s % 2, j, sa);
                }
            } else {
                // FP4: a stage is one 128-block, its sub-stages chained into part as one group, then its close by the columns' largest scales.
                load_sa(s * H);
                tf_wg_arrive();
                if ((s + 1) * H <= subs) {
#pragma unroll
                    for (int j = 0; j < H; ++j) mmas(s, j, j == 0);
                    tf_wg_commit();
                } else {
#pragma unroll
                    for (int j = 0; j < H; ++j)
                        if (s * H + j < subs) mmas(s, j, j == 0);
                    tf_wg_commit();
                }
                issue(s + WG_RING - 1);
                if (s + 1 < stages) convert(s + 1, (s + 1) % 2);
                tf_wg_wait0();
                close(s % 2, 0, sa);
            }
        }
        // Every copy has landed and every warp is done with the buffers before the next tile's prologue refills them.
        tf_cp_wait<0>();
        __syncthreads();
#pragma unroll
        for (int i = 0; i < NACC; ++i) {
            tf_store_y(y, y_stride, m, n, m0 + wg_row + 16 * wn + g + 8 * ((i / 2) % 2), n0 + wg_col + 8 * (i / 4) + 2 * t4 + i % 2, acc[i]);
        }
    }
}
#endif
