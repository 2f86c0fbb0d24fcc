// mxfp4_gemm_slots: routed slots at decode, a warp per 16-column tile over all of K, weights as the MMA's A (x as B, its first column live), each output chained in registers; the same bits as mxfp4_gemm_rows8.
#define SLOTS_WARPS 4
#define SLOTS_RD 3
#define SLOTS_SUB 2
#define SLOTS_MAX_K 8192

// A block's shared memory: each warp's ring of raw weight chunks (16 rows of 64 SLOTS_SUB bytes, swizzled) and their scale words, x's row in B-fragment order (then 16 zero words), its scales, and e8m0 as f32.
struct TfSlotsSmem {
    __align__(16) u8 ring[SLOTS_WARPS][SLOTS_RD][ROWS_BN * 64 * SLOTS_SUB];
    u32 rsc[SLOTS_WARPS][SLOTS_RD][ROWS_BN * SLOTS_SUB];
    __align__(16) u32 xs[SLOTS_MAX_K / 2 + 16];
    float sas[SLOTS_MAX_K / 128];
    float e8[256];
};

// Byte offset of 16-byte piece v of row r in a ring slot: pieces swizzled so ldmatrix's 8 rows at one piece hit distinct banks.
__device__ __forceinline__ u32 tf_slots_off(int r, int v) {
    return (u32)(r * 64 * SLOTS_SUB + ((SLOTS_SUB == 1 ? v ^ ((r >> 1) & 3) : v ^ (r & 7)) << 4));
}

// One warp's 16-column tile from n0 of y = x . W^T over all of K (x staged in sm), its chain in registers; chunks of SLOTS_SUB 128-wide sub-chunks, SLOTS_RD in flight. FAST: the tile inside the matrix, aligned, K whole chunks, K ascending: no per-piece tests and stepped pointers.
template <bool FAST>
__device__ __forceinline__ void tf_slots_tile(TfSlotsSmem& sm, const u8* w, const u8* w_scale, float* y, int n0, int n, int k, bool rev, int swap) {
    constexpr int SUB = SLOTS_SUB, PIECES = 2 * SUB, PER_ROW = 4 * SUB, SLOT = ROWS_BN * 64 * SUB;
    static_assert(SUB == 1 || SUB == 2, "a chunk's scale words are one a lane");
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t4 = lane % 4;
    int kb = k / 32, nsub = (kb + 3) / 4, chunks = (nsub + SUB - 1) / SUB;
    size_t wstride = k / 2;
    bool vec = ((size_t)w % 16) == 0, svec = kb % PER_ROW == 0 && ((size_t)w_scale % 4) == 0;
    // Lane piece i: row lane / PER_ROW + i * 32 / PER_ROW, piece v = lane % PER_ROW of the chunk's row.
    int v = lane % PER_ROW;
    const u8* src[PIECES];
    bool live[PIECES];
    u32 off[PIECES];
#pragma unroll
    for (int i = 0; i < PIECES; ++i) {
        int r = lane / PER_ROW + i * 32 / PER_ROW;
        live[i] = n0 + r < n;
        src[i] = w + (size_t)min(n0 + r, n - 1) * wstride + 16 * v;
        off[i] = tf_slots_off(r, v);
    }
    // Scale word lane: row lane / SUB, word lane % SUB of the chunk's SUB words (lanes below 16 SUB).
    int srow = lane / SUB, sw = lane % SUB;
    bool slive = lane < ROWS_BN * SUB && n0 + srow < n;
    const u8* ssrc = w_scale + (size_t)min(n0 + srow, n - 1) * kb + 4 * sw;
    u32 ring = tf_smem_addr(sm.ring[warp][0]), rsc = tf_smem_addr(&sm.rsc[warp][0][lane % (ROWS_BN * SUB)]);
    auto chunk_at = [&](int c) { return rev ? chunks - 1 - c : c; };
    int islot = 0;
    // Chunk c's weight pieces and scale words into the next ring slot (zeros past K or the matrix); one copy group a call.
    auto issue = [&](int c) {
        if (c < chunks) {
            if constexpr (FAST) {
#pragma unroll
                for (int i = 0; i < PIECES; ++i) {
                    tf_cp_async16_at(ring + (u32)(islot * SLOT) + off[i], src[i], 16);
                    src[i] += 64 * SUB;
                }
                if (lane < ROWS_BN * SUB) tf_cp_async4_at(rsc + (u32)(islot * ROWS_BN * SUB * 4), ssrc, 4);
                ssrc += 4 * SUB;
            } else {
                int cc = chunk_at(c);
                bool in_k = 4 * (cc * SUB + v / 4) + v % 4 < kb;
#pragma unroll
                for (int i = 0; i < PIECES; ++i) {
                    const u8* p = src[i] + (size_t)cc * 64 * SUB;
                    bool ok = in_k && live[i];
                    if (vec)
                        tf_cp_async16_at(ring + (u32)(islot * SLOT) + off[i], ok ? p : w, ok ? 16 : 0);
                    else
                        *(uint4*)&sm.ring[warp][islot][off[i]] = tf_ldg_part(p, ok ? 16 : 0, false);
                }
                if (lane < ROWS_BN * SUB) {
                    const u8* p = ssrc + (size_t)cc * 4 * SUB;
                    if (svec) {
                        tf_cp_async4_at(rsc + (u32)(islot * ROWS_BN * SUB * 4), slive ? p : w_scale, slive ? 4 : 0);
                    } else {
                        u32 word = 0;
#pragma unroll 1
                        for (int j = 0; j < 4; ++j)
                            if (slive && 4 * (cc * SUB + sw) + j < kb) word |= (u32)p[j] << (8 * j);
                        sm.rsc[warp][islot][lane] = word;
                    }
                }
            }
            islot = islot + 1 == SLOTS_RD ? 0 : islot + 1;
        }
        tf_cp_commit();
    };
#pragma unroll
    for (int d = 0; d < SLOTS_RD; ++d) issue(d);
    // ldmatrix addresses in a slot: (rows 8 (mi % 2) + lane % 8, piece 4 h + 2 x + mi / 2), mi = lane / 8.
    u32 lm[SUB][2];
#pragma unroll
    for (int h = 0; h < SUB; ++h)
#pragma unroll
        for (int x = 0; x < 2; ++x) lm[h][x] = tf_slots_off(((lane / 8) % 2) * 8 + lane % 8, 4 * h + 2 * x + lane / 16);
    // B fragments: lanes of column 0 (g == 0) read x, the rest the zero words.
    u32 xrow = tf_smem_addr(g == 0 ? &sm.xs[t4 * 16] : &sm.xs[SLOTS_MAX_K / 2]), xstep = g == 0 ? 256u : 0u;
    float acc0 = 0.0f, acc1 = 0.0f;
    int cslot = 0;
    for (int c = 0; c < chunks; ++c) {
        int cc = FAST ? c : chunk_at(c);
        u32 base = ring + (u32)(cslot * SLOT);
        tf_cp_wait<SLOTS_RD - 1>();
        // The lane's pieces permuted in place: word t4 holds bytes t4, t4 + 4, t4 + 8, t4 + 12 (k pairs of steps 2b and 2b + 1).
#pragma unroll
        for (int i = 0; i < PIECES; ++i) {
            uint4 x;
            asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(base + off[i]));
            uint4 o = tf_rows_permute<MMA_FP4>(x);
            asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(base + off[i]), "r"(o.x), "r"(o.y), "r"(o.z), "r"(o.w) : "memory");
        }
        __syncwarp();
        // bw[h][x][mi]: the words of (rows 8 (mi % 2) + g, piece 4 h + 2 x + mi / 2).
        u32 bw[SUB][2][4], sc0[SUB], sc1[SUB];
#pragma unroll
        for (int h = 0; h < SUB; ++h) {
#pragma unroll
            for (int x = 0; x < 2; ++x) tf_ldmatrix_x4_at(bw[h][x], base + lm[h][x]);
            sc0[h] = sm.rsc[warp][cslot][g * SUB + h], sc1[h] = sm.rsc[warp][cslot][(g + 8) * SUB + h];
        }
        __syncwarp();
        cslot = cslot + 1 == SLOTS_RD ? 0 : cslot + 1;
        issue(c + SLOTS_RD);
#pragma unroll
        for (int hi = 0; hi < SUB; ++hi) {
            int h = rev ? SUB - 1 - hi : hi, sub = cc * SUB + h;
            if (!FAST && sub >= nsub) continue;
            u32 xw[16];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint4 t;
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(t.x), "=r"(t.y), "=r"(t.z), "=r"(t.w) : "r"(xrow + (u32)sub * xstep + 16 * i));
                xw[4 * i] = t.x, xw[4 * i + 1] = t.y, xw[4 * i + 2] = t.z, xw[4 * i + 3] = t.w;
            }
            float sa = sm.sas[sub];
#ifdef TF_FAULT_lost_act_scale
            sa = 1.0f;
#endif
            // The 128-block's chain: each 32-block's weights fold their code against the column's largest (tf_fold_mul), whose scale closes it.
            int e0 = tf_code_max4(sc0[h]), e1 = tf_code_max4(sc1[h]);
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int bi = 0; bi < 4; ++bi) {
                int b = rev ? 3 - bi : bi;
                if (FAST || 4 * sub + b < kb) {
                    // Block b: column g's words (rows 0-7) and column g + 8's (rows 8-15), two k16 steps.
                    u32 h0[4], h1[4];
                    tf_e2m1x8_to_f16x2_by(bw[h][b / 2][2 * (b % 2)], swap, tf_fold_mul((int)((sc0[h] >> (8 * b)) & 0xffu), e0), h0);
                    tf_e2m1x8_to_f16x2_by(bw[h][b / 2][1 + 2 * (b % 2)], swap, tf_fold_mul((int)((sc1[h] >> (8 * b)) & 0xffu), e1), h1);
#pragma unroll
                    for (int st = 0; st < 2; ++st) {
                        u32 af[4] = {h0[2 * st], h1[2 * st], h0[2 * st + 1], h1[2 * st + 1]};
                        u32 bf[2] = {xw[4 * b + 2 * st], xw[4 * b + 2 * st + 1]};
                        tf_mma_f16(d, af, bf);
                    }
                }
            }
            acc0 = fmaf(d[0], sa * sm.e8[e0], acc0);
            acc1 = fmaf(d[2], sa * sm.e8[e1], acc1);
        }
    }
    if (t4 == 0) {
        if (n0 + g < n) y[n0 + g] = acc0;
        if (n0 + g + 8 < n) y[n0 + g + 8] = acc1;
    }
}

// Block (x, s, z), launched with SLOTS_WARPS warps (more only help stage x): warp w takes tiles SLOTS_WARPS x + w, SLOTS_WARPS gridDim.x on, of slot s's expert e = idx[s] (weights tables[z][2e], scales tables[z][2e + 1]) on quantised row s / per_row into row s of ys[z]; an id outside 0..experts gives a zero row.
extern "C" __global__ void __launch_bounds__(256) mxfp4_gemm_slots(const u16* q, const float* q_scale, const u64* table0, const u64* table1,
                                                                                const int* idx, int per_row, float* y0, float* y1, int n, int k,
                                                                                int experts) {
    tf_grid_begin();
    __shared__ TfSlotsSmem sm;
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int s = blockIdx.y, e = idx[s], row = s / per_row, first = blockIdx.x * SLOTS_WARPS + warp, step = gridDim.x * SLOTS_WARPS;
    float* y = (blockIdx.z ? y1 : y0) + (size_t)s * n;
    if (e < 0 || e >= experts) {
        for (int n0 = first * ROWS_BN; warp < SLOTS_WARPS && n0 < n; n0 += step * ROWS_BN)
            if (lane < ROWS_BN && n0 + lane < n) y[n0 + lane] = 0.0f;
        return;
    }
    bool rev = tf_fault_rev();
    int swap = tf_fault_swap();
    int nsub = (k / 32 + 3) / 4, q_stride = (k + 7) / 8 * 8;
    // x's words (k pairs) for sub-chunk c, lane t4: word 2j + h of the lane's 16 is the pair at k = 128 c + 16 j + 8 h + 2 t4; loaded 4 words (t4 = 0..3) at a time.
    const u32* xq = (const u32*)(q + (size_t)row * q_stride);
#pragma unroll 4
    for (int gi = tid; gi < nsub * 16; gi += blockDim.x) {
        uint4 t = 4 * gi < k / 2 ? *(const uint4*)(xq + 4 * gi) : make_uint4(0u, 0u, 0u, 0u);
        u32* d = &sm.xs[(gi / 16) * 64 + gi % 16];
        d[0] = t.x, d[16] = t.y, d[32] = t.z, d[48] = t.w;
    }
    if (tid < 16) sm.xs[SLOTS_MAX_K / 2 + tid] = 0u;
    for (int i = tid; i < nsub; i += blockDim.x) sm.sas[i] = q_scale[(size_t)row * ((k + QB - 1) / QB) + i];
    for (int i = tid; i < 256; i += blockDim.x) sm.e8[i] = tf_e8m0_sel((u8)i);
#ifndef TF_FAULT_race_no_sync
    __syncthreads();
#endif
    const u64* table = blockIdx.z ? table1 : table0;
    const u8* w = (const u8*)table[2 * e];
    const u8* w_scale = (const u8*)table[2 * e + 1];
    bool aligned = ((size_t)w % 16) == 0 && ((size_t)w_scale % 4) == 0 && k % (128 * SLOTS_SUB) == 0 && !rev;
    for (int n0 = first * ROWS_BN; warp < SLOTS_WARPS && n0 < n; n0 += step * ROWS_BN) {
        if (aligned && n0 + ROWS_BN <= n)
            tf_slots_tile<true>(sm, w, w_scale, y, n0, n, k, rev, swap);
        else
            tf_slots_tile<false>(sm, w, w_scale, y, n0, n, k, rev, swap);
    }
}
