// The prompt tiles on sm_90a with the weights as wgmma's register operand: a third warpgroup feeds a ring of stages (tf_wg_feed), each MMA warpgroup converts its 64 weight rows' raw FP8 or FP4 codes straight into A fragments, the activations are the shared B operand; and the prompt tiles' entry, tf_mma_pipe.
#ifndef RS_RING
#define RS_RING 4
#endif
// 32-wide sub-stages a stage (a 128-block).
#define WG_SUB 4
static_assert(RS_RING >= 3, "the feeder announces a stage once it has issued the next, whose slot the MMA warpgroups free two stages before");

// Byte offset in a raw stage of column r's 16-byte chunk c (FP8: 8 a column, c = 2 x sub-stage + half; FP4: 4, c = sub-stage): swizzled so one column's chunks and four columns' chunks at one c each fill distinct banks.
template <int FMT>
__device__ __forceinline__ u32 tf_wg_raw(int r, int c) {
    if constexpr (FMT == MMA_FP8) return r * 128 + ((c ^ (r & 7)) << 4);
    return r * 64 + ((c ^ ((r >> 1) & 3)) << 4);
}

// Floats a stage's activation scales take: activation row 8c + 2t + e of an NT-row tile at t (NT / 4 + 4) + 2c + e, so a thread reads its scales as float4s, the four t apart in banks.
#define RS_SA (4 * (PIPE_BM / 4 + 4))

// The register-operand ring: activation stages (tf_pipe_a's layout, the B operand), raw weight stages (tf_wg_raw's layout; FP4 fills half), each stage's activation scales, and each slot's barriers (full: its stage has landed; empty: both MMA warpgroups are done with it).
struct TfRsSmem {
    u16 as[RS_RING][WG_SUB][PIPE_BM * MMA_BK];
    u8 raw[RS_RING][MMA_BN * 128];
    float sa[RS_RING][RS_SA];
    u64 full[RS_RING], empty[RS_RING];
};

// Threads of a prompt entry's block: on sm_90a two MMA warpgroups and the warpgroup that feeds them (tf_wg_feed); cuda/dynamic.rs launches the same.
#ifdef TF_WGMMA
#define TF_PIPE_THREADS 384
#else
#define TF_PIPE_THREADS 256
#endif

// Bytes of dynamic shared memory the sm_90a prompt entries need (the register-operand ring or, for unaligned FP8 weights, tf_mma_pipe_bm's buffers); cuda/dynamic.rs passes the same.
#define TF_PIPE_DYN_BYTES (sizeof(TfRsSmem) > sizeof(TfPipeSmem) ? sizeof(TfRsSmem) : sizeof(TfPipeSmem))

#ifdef TF_WGMMA
// A 16-byte copy from global src to shared dst.
__device__ __forceinline__ void tf_cp_async16(u32 dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}

// An 8-byte copy of `bytes` (0 or 8) from global src to shared dst, zeros when 0.
__device__ __forceinline__ void tf_cp_async8_at(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}

// A shared-memory barrier at bar that completes a phase after `count` arrivals.
__device__ __forceinline__ void tf_mbar_init(u32 bar, u32 count) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory"); }

// This thread's arrival at bar, releasing its earlier writes to the threads that wait on the phase.
__device__ __forceinline__ void tf_mbar_arrive(u32 bar) { asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(bar) : "memory"); }

// Waits until bar's phase of parity `parity` has completed.
__device__ __forceinline__ void tf_mbar_wait(u32 bar, u32 parity) {
    asm volatile("{ .reg .pred p; TF_MBAR_WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra TF_MBAR_WAIT; }" ::"r"(bar), "r"(parity) : "memory");
}

// The feeding warpgroup's copies of every stage of this block's tiles into the ring: a slot is refilled once both MMA warpgroups released it (empty), and a stage is announced (full) once its copies have landed and are visible to the tensor cores.
template <int FMT, int NT>
__device__ __forceinline__ void tf_wg_feed(TfRsSmem& sm, const TfTiles& T, int kend, int subs, int stages, size_t row_bytes) {
    const int q_stride = T.q_stride, qs_stride = T.qs_stride, n = T.n;
    constexpr int AR = NT / 32, H = WG_SUB, RAW_ROW = FMT == MMA_FP8 ? 128 : 64, RAW_CH = RAW_ROW / 16, RAW_ROWS = 128 / RAW_CH;
    constexpr u32 A_SUB = PIPE_BM * MMA_BK * 2, RAW_STAGE = MMA_BN * 128;
    int p = threadIdx.x - 256;
    // Copies: activation rows ar + 32 i at chunk ac of each sub-stage; whole raw stages row rr + RAW_ROWS i at chunk rc; at the edges weight row p, and activation scale row p.
    int ar = p / 4, ac = p % 4, rr = p / RAW_CH, rc = p % RAW_CH;
    u32 a_dst[AR];
#pragma unroll
    for (int i = 0; i < AR; ++i) a_dst[i] = tf_smem_addr(&sm.as[0][0][tf_pipe_a(ar + 32 * i, ac)]);
    u32 raw0 = tf_smem_addr(&sm.raw[0][0]), raw_whole = raw0 + tf_wg_raw<FMT>(rr, rc);
    u32 sa_dst = tf_smem_addr(&sm.sa[0][(p / 2 % 4) * (NT / 4 + 4) + p / 8 * 2 + p % 2]);
    u32 full0 = tf_smem_addr(&sm.full[0]), empty0 = tf_smem_addr(&sm.empty[0]);
    int tiles = tf_row_tiles<NT>(T) * ((n + MMA_BN - 1) / MMA_BN), gs = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const TfTile tl = tf_tile_at<NT>(T, tile);
        const u16* q = tl.q;
        const float* q_scale = tl.q_scale;
        const u8* w = tl.w;
        int m = tl.m, m0 = tl.m0, n0 = tl.n0;
        const u16* a_src[AR];
        int a_lim[AR];
        tf_act_rows<AR, 32>(q, q_stride, m, m0, ar, ac, kend, a_src, a_lim);
        int gn = n0 + p;
        const u8* b_src = w + (size_t)min(gn, n - 1) * row_bytes;
        const u8* bw_src = w + (size_t)(n0 + rr) * row_bytes + (FMT == MMA_FP8 ? (rc % 2) * 16 : 0);
        const float* sa_src = q_scale + (size_t)min(m0 + p, m - 1) * qs_stride;
        bool inside = m0 + NT <= m && n0 + MMA_BN <= n && kend % MMA_BK == 0;
        for (int s = 0; s < stages; ++s, ++gs) {
            int slot = gs % RS_RING;
            if (gs >= RS_RING) tf_mbar_wait(empty0 + 8 * slot, (gs / RS_RING + 1) & 1);
#ifdef TF_FAULT_race_no_sync
            // The stage is announced before its copies, one warp's held back, so the consumers' reads race them on every run.
            tf_mbar_arrive(full0 + 8 * slot);
            if (p / 32 == 3) __nanosleep(4000);
#endif
            if (p < NT) tf_cp_async4_at(sa_dst + slot * RS_SA * 4, sa_src + s, 4);
            if (inside && (s + 1) * H <= subs) {
#pragma unroll
                for (int j = 0; j < H; ++j) {
#pragma unroll
                    for (int i = 0; i < AR; ++i) tf_cp_async16(a_dst[i] + (slot * H + j) * A_SUB, a_src[i] + (s * H + j) * MMA_BK);
                }
                size_t rk = FMT == MMA_FP8 ? (size_t)(s * H + rc / 2) * MMA_BK : (size_t)(s * H + rc) * (MMA_BK / 2);
#pragma unroll
                for (int i = 0; i < RAW_CH; ++i)
                    tf_cp_async16(raw_whole + slot * RAW_STAGE + i * RAW_ROWS * RAW_ROW, bw_src + (size_t)i * RAW_ROWS * row_bytes + rk);
            } else {
#pragma unroll
                for (int j = 0; j < H; ++j) {
                    int u = s * H + j, k0 = u * MMA_BK;
                    if (u >= subs) break;
                    u32 sub = (u32)(slot * H + j);
#pragma unroll
                    for (int i = 0; i < AR; ++i) {
                        int bytes = min(max(a_lim[i] - k0, 0), 8) * 2;
                        tf_cp_async16_at(a_dst[i] + sub * A_SUB, bytes > 0 ? a_src[i] + k0 : q, bytes);
                    }
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        if constexpr (FMT == MMA_FP8) {
                            int bytes = gn < n ? min(max(kend - k0 - 16 * h, 0), 16) : 0;
                            tf_cp_async16_at(raw0 + slot * RAW_STAGE + tf_wg_raw<FMT>(p, 2 * j + h), bytes > 0 ? b_src + k0 + 16 * h : w, bytes);
                        } else {
                            // K is whole 32-blocks, so a sub-stage inside K is whole.
                            tf_cp_async8_at(raw0 + slot * RAW_STAGE + tf_wg_raw<FMT>(p, j) + 8 * h, gn < n ? b_src + k0 / 2 + 8 * h : w, gn < n ? 8 : 0);
                        }
                    }
                }
            }
            tf_cp_commit();
#ifndef TF_FAULT_race_no_sync
            // The stage before has landed: fenced for the tensor cores and announced.
            if (gs > 0) {
                tf_cp_wait<1>();
                tf_fence_async_smem();
                tf_mbar_arrive(full0 + 8 * ((gs - 1) % RS_RING));
            }
#endif
        }
    }
    tf_cp_wait<0>();
#ifndef TF_FAULT_race_no_sync
    if (gs > 0) {
        tf_fence_async_smem();
        tf_mbar_arrive(full0 + 8 * ((gs - 1) % RS_RING));
    }
#endif
}

// Tiles of 128 weight rows by NT activation rows, consumed by warpgroups 0 and 1 from the ring that warpgroup 2 feeds (tf_wg_feed): warpgroup wm's rows 64 wm.. are its MMAs' M, the activations their N; per 128-block a fresh chain of eight k16 steps into part (FP4: each 32-block folded against the row's largest code, tf_fold_mul), then part's scaled add.
template <int FMT, int NT>
__device__ __forceinline__ void tf_wg_rs(TfRsSmem& sm, const TfTiles& T) {
    const int col0 = T.col0, y_stride = T.y_stride, n = T.n, k = T.k;
    constexpr int NACC = NT / 2, H = WG_SUB, HALF = WG_SUB;
    constexpr u32 A_SUB = PIPE_BM * MMA_BK * 2;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
    int tiles = tf_row_tiles<NT>(T) * ((n + MMA_BN - 1) / MMA_BN);
    int nblk = (k + 127) / 128, kend = k;
#ifdef TF_FAULT_drop_tail_block
    kend = (nblk - 1) * 128;
#endif
    int subs = (kend + MMA_BK - 1) / MMA_BK, stages = (subs + H - 1) / H;
    size_t row_bytes = FMT == MMA_FP8 ? (size_t)k : (size_t)(k / 2);
    u32 full0 = tf_smem_addr(&sm.full[0]), empty0 = tf_smem_addr(&sm.empty[0]);
    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < RS_RING; ++i) tf_mbar_init(full0 + 8 * i, 128), tf_mbar_init(empty0 + 8 * i, 256);
    }
    __syncthreads();
    // Registers a thread: the feeder few, the MMA warpgroups their fragments; the block's 384 x 168 at launch are all there is to share.
    constexpr int FEED_REGS = 56, MMA_REGS = 224;
    static_assert(128 * FEED_REGS + 256 * MMA_REGS <= TF_PIPE_THREADS * 168, "setmaxnreg.inc would wait forever for registers the block does not have");
    if (warp >= 8) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(FEED_REGS));
        tf_wg_feed<FMT, NT>(sm, T, kend, subs, stages, row_bytes);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(MMA_REGS));
    u64 db0 = tf_wg_desc(tf_smem_addr(&sm.as[0][0][0]));
    // This thread's weight rows wr and wr + 8 (its fragment rows), and the selector of its fragment bytes in a 16-byte chunk's words t4 / 2 and 2 + t4 / 2.
    int wr = 16 * warp + g;
    u32 sel = t4 % 2 ? 0x7632u : 0x5410u;
    // FP4: the selector of byte t4 of two words into a word's low bytes, and the planted nibble swap.
    u32 sel4 = (u32)(t4 | (4 + t4) << 4);
    int swap = tf_fault_swap();
    // The ring stage of the tile's first stage: stage s sits in slot (g0 + s) % RS_RING, its phase (g0 + s) / RS_RING.
    int g0 = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, g0 += stages) {
        const TfTile tl = tf_tile_at<NT>(T, tile);
        const u8* w_scale = tl.w_scale;
        float* y = tl.y;
        int m = tl.m, m0 = tl.m0, n0 = tl.n0;
        float acc[NACC], part[NACC];
#pragma unroll
        for (int i = 0; i < NACC; ++i) acc[i] = part[i] = 0.0f;
        // Scale rows of this thread's weight rows: FP8 their 128-row block's, FP4 their own 32-block codes.
        const u8* sw_src[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int row = min(n0 + wr + 8 * h, n - 1);
            sw_src[h] = FMT == MMA_FP8 ? w_scale + (size_t)((col0 + row) / 128) * nblk : w_scale + (size_t)row * (k / 32);
        }
        // FP4: the four codes of 128-block s of this thread's row wr + 8 h (zero past K), one word where rows hold whole aligned blocks.
        bool words = subs % 4 == 0 && (size_t)w_scale % 4 == 0 && (k / 32) % 4 == 0;
        auto codes = [&](int s, int h) {
            if (FMT == MMA_FP8 || s >= stages) return 0u;
            return words ? *(const u32*)(sw_src[h] + 4 * s) : tf_codes4(sw_src[h], s, subs);
        };
        auto slot = [&](int s) { return (g0 + s) % RS_RING; };
        // Stage s's copies have landed (tf_wg_feed announces them).
        auto landed = [&](int s) { tf_mbar_wait(full0 + 8 * slot(s), ((g0 + s) / RS_RING) & 1); };
        // Whether the tile's weight rows all lie in one 128-row block of the scale grid.
        bool one = FMT == MMA_FP8 && (col0 + n0) % 128 == 0;
        // Half hf of stage s's A fragments of rows wr and wr + 8 (FP4 with the rows' fold multipliers mul): a0/a2 row wr's K pairs 2 t4 and 8 + 2 t4, a1/a3 row wr + 8's.
        auto frags = [&](int s, int hf, u32 (&f)[HALF][4], const u32 (&mul)[2][4]) {
            const u8* raw = &sm.raw[slot(s)][0];
            if constexpr (FMT == MMA_FP4) {
                // A 32-block's 16-byte chunk a row: bytes t4, 4 + t4, 8 + t4 and 12 + t4 are this lane's two k16 steps.
#pragma unroll
                for (int b = 0; b < 2; ++b) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        uint4 x = *(const uint4*)(raw + tf_wg_raw<FMT>(wr + 8 * h, 2 * hf + b));
                        u32 v = __byte_perm(__byte_perm(x.x, x.y, sel4), __byte_perm(x.z, x.w, sel4), 0x5410), o[4];
                        tf_e2m1x8_to_f16x2_by(v, swap, mul[h][2 * hf + b], o);
                        f[2 * b][h] = o[0], f[2 * b][2 + h] = o[1], f[2 * b + 1][h] = o[2], f[2 * b + 1][2 + h] = o[3];
                    }
                }
            } else {
#pragma unroll
                for (int j = 0; j < HALF; ++j) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const u8* ch = raw + tf_wg_raw<MMA_FP8>(wr + 8 * h, HALF * hf + j) + 4 * (t4 / 2);
                        u32 b[2];
                        tf_rows_e4m3x4(__byte_perm(*(const u32*)ch, *(const u32*)(ch + 8), sel), b);
                        f[j][h] = b[0], f[j][2 + h] = b[1];
                    }
                }
            }
            // Pinned here, ahead of the MMAs' fence, so no conversion sinks between the MMAs that read them.
#pragma unroll
            for (int j = 0; j < HALF; ++j) asm volatile("" : "+r"(f[j][0]), "+r"(f[j][1]), "+r"(f[j][2]), "+r"(f[j][3]));
        };
        // Half hf of stage s's k16 steps into part (afresh at the stage's first), issued and committed as one group; none past K.
        auto mmas = [&](int s, int hf, const u32 (&f)[HALF][4]) {
            u64 db = db0 + (u64)slot(s) * H * (A_SUB / 16) + hf * (HALF / 2) * (A_SUB / 16);
            auto mma = [&](int j) {
                u64 d = db + (j / 2) * (A_SUB / 16) + 2 * (j % 2);
                if constexpr (NT == 128)
                    tf_wgmma_rs_n128(part, f[j], d, hf + j > 0);
                else
                    tf_wgmma_rs_n64(part, f[j], d, hf + j > 0);
            };
            // Whole stages take a branch-free chain (a branch between MMAs makes the compiler fence them); each path fences and commits its own group.
            if ((s + 1) * H <= subs) {
                tf_wg_arrive();
#pragma unroll
                for (int j = 0; j < HALF; ++j) mma(j);
                tf_wg_commit();
            } else {
                tf_wg_arrive();
#pragma unroll
                for (int j = 0; j < HALF; ++j)
                    if (s * H + (HALF * hf + j) / 2 < subs) mma(j);
                tf_wg_commit();
            }
        };
        // part's scaled add into acc: element i is weight row wr + 8 ((i / 2) % 2), activation row 8 (i / 4) + 2 t4 + i % 2; one scale product per activation row where the tile's rows share a scale row.
        auto close = [&](int s, const float* sw) {
            const float4* sas = (const float4*)&sm.sa[slot(s)][t4 * (NT / 4 + 4)];
#pragma unroll
            for (int c2 = 0; c2 < NACC / 8; ++c2) {
                float4 sa4 = sas[c2];
#ifdef TF_FAULT_lost_act_scale
                sa4 = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
#endif
#pragma unroll
                for (int c1 = 0; c1 < 2; ++c1) {
                    int c = 2 * c2 + c1;
                    float sx = c1 ? sa4.z : sa4.x, sy = c1 ? sa4.w : sa4.y;
                    if (one) {
                        float px = sx * sw[0], py = sy * sw[0];
#pragma unroll
                        for (int e = 0; e < 4; ++e) acc[4 * c + e] = fmaf(part[4 * c + e], e % 2 ? py : px, acc[4 * c + e]);
                    } else {
#pragma unroll
                        for (int e = 0; e < 4; ++e) acc[4 * c + e] = fmaf(part[4 * c + e], (e % 2 ? sy : sx) * sw[e / 2], acc[4 * c + e]);
                    }
                }
            }
        };
        // Scale codes loaded at a stage's top: cc this stage's (FP8 the rows' 128-block code read at the close; FP4 the rows' largest), cn the next stage's (FP4 the rows' four, first read after this stage's first half of MMAs, then turned into the fold multipliers mn and the largest codes en, kept for the stage).
        u32 fa[HALF][4], fb[HALF][4], cc[2], cn[2] = {codes(0, 0), codes(0, 1)}, mn[2][4];
        int en[2];
        auto fold = [&]() {
#pragma unroll
            for (int h = 0; h < 2; ++h) en[h] = FMT == MMA_FP4 ? tf_fold_mul4(cn[h], mn[h]) : 0;
        };
        landed(0);
        fold();
        frags(0, 0, fa, mn);
        for (int s = 0; s < stages; ++s) {
            // This stage's fold multipliers and largest codes (FP8 its scale codes), before the next stage's replace them.
            u32 mc[2][4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int j = 0; j < 4; ++j) mc[h][j] = mn[h][j];
                cc[h] = FMT == MMA_FP8 ? sw_src[h][s] : (u32)en[h];
                cn[h] = codes(s + 1, h);
            }
            // Each half's fragments are converted while the MMAs before them run.
            mmas(s, 0, fa);
            frags(s, 1, fb, mc);
            mmas(s, 1, fb);
            float sw[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) sw[h] = tf_e8m0_sel((u8)cc[h]);
            tf_wg_wait1();
            if (s + 1 < stages) {
                landed(s + 1);
                fold();
                frags(s + 1, 0, fa, mn);
            }
            tf_wg_wait0();
            close(s, sw);
            // This thread is done with the stage's slot: its MMAs have read it, its fragments and scales are in registers.
            tf_mbar_arrive(empty0 + 8 * slot(s));
        }
#pragma unroll
        for (int i = 0; i < NACC; ++i) {
            tf_store_y(y, y_stride, m, n, m0 + 8 * (i / 4) + 2 * t4 + i % 2, n0 + wr + 8 * ((i / 2) % 2), acc[i]);
        }
    }
}
#endif

// Tiles of y[:, 0..n] (row stride y_stride) from f16 e4m3-grid rows q (row stride q_stride, a multiple of 8; a scale a 128 in q_scale) and weights w[0..n] (FP8 rows of k codes with 128x128 scales from row col0, or FP4 rows of k/2 bytes with per-32 scales): 128-row tiles when they fill the GPU in fewer rounds, else 64; on sm_90a the register-operand ring (FP4 always, FP8 where the weight rows are 16-byte aligned).
template <int FMT>
__device__ __forceinline__ void tf_mma_pipe_tiles(const TfTiles& T) {
    u32 sms;
    asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
    long tiles_n = (T.n + MMA_BN - 1) / MMA_BN;
    long rounds128 = (tiles_n * ((T.m + 127) / 128) + sms - 1) / sms, rounds64 = (tiles_n * ((T.m + 63) / 64) + sms - 1) / sms;
    // Row groups hold at most 64 rows.
    bool big = !T.table && 5 * rounds128 <= 3 * rounds64;
#ifdef TF_WGMMA
    // 1024-byte aligned: every stage buffer starts a 64-byte-swizzle atom, as wgmma's descriptors need.
    extern __shared__ __align__(1024) u8 tf_dyn[];
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < TF_PIPE_DYN_BYTES) __trap();
    bool ring = FMT == MMA_FP4 || (T.k % 16 == 0 && ((size_t)T.w % 16) == 0);
    // tf_mma_pipe_bm's tiles take the MMA warpgroups alone.
    if (!ring && threadIdx.x >= 256) return;
    TfPipeSmem& psm = *(TfPipeSmem*)tf_dyn;
    if (!ring && big)
        tf_mma_pipe_bm<FMT, 128, true>(psm, T);
    else if (!ring)
        tf_mma_pipe_bm<FMT, 64, true>(psm, T);
    else {
        TfRsSmem& rsm = *(TfRsSmem*)tf_dyn;
        if (big)
            tf_wg_rs<FMT, 128>(rsm, T);
        else
            tf_wg_rs<FMT, 64>(rsm, T);
    }
#else
    __shared__ __align__(1024) TfPipeSmem sm;
    if (big)
        tf_mma_pipe_bm<FMT, 128, false>(sm, T);
    else
        tf_mma_pipe_bm<FMT, 64, false>(sm, T);
#endif
}

// tf_mma_pipe_tiles of one matrix.
template <int FMT>
__device__ __forceinline__ void tf_mma_pipe(const u16* q, int q_stride, const float* q_scale, int qs_stride, const u8* w,
                                            const u8* w_scale, int col0, float* y, int y_stride, int m, int n, int k) {
    tf_mma_pipe_tiles<FMT>(tf_tiles(q, q_stride, q_scale, qs_stride, w, w_scale, col0, y, y_stride, m, n, k));
}
