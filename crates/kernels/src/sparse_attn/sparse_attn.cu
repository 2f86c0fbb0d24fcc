// sparse_attn: one block per (row, group of HG heads) (items past the grid loop), the row's list in shared memory up to CAP; scores by half-warps with the CPU's 16 dot lanes, the softmax with sink in list order, then P.V in fixed 64-entry splits summed in split order, so no bit depends on the grid, the block size or HG.
#define SPLIT 64
// P.V splits whose chains one thread steps side by side.
#define PV_SPLITS 4

// Entries one half-warp scores side by side.
#define DOTS 4
// Entries whose values a P.V step loads before its FMAs, per split.
#define PV_AHEAD 8
static_assert((SPLIT / 2) % PV_AHEAD == 0, "a P.V step stays inside one split, the planted half split included");

// q_h . k of up to DOTS entries `k[d]` (d < n) for the group's heads h < nh, in 16 lanes each (lane j takes elements j, j + 16, ...), then the fixed tree (j, j+8), (j, j+4), (j, j+2), (0, 1); lane 0 of the half-warp holds them.
template <int HG>
__device__ __forceinline__ void sparse_attn_dots(const float* q, int nh, const float* const* k, int n, int hd, int lane, float (*out)[DOTS]) {
    unsigned half = 0xffffu << (threadIdx.x & 16);
    float acc[HG][DOTS];
#pragma unroll
    for (int h = 0; h < HG; ++h)
#pragma unroll
        for (int d = 0; d < DOTS; ++d) acc[h][d] = 0.0f;
#pragma unroll(HG == 1 ? 8 : 4)
    for (int i = lane; i < hd; i += 16) {
        float ki[DOTS];
#pragma unroll
        for (int d = 0; d < DOTS; ++d) ki[d] = d < n ? k[d][i] : 0.0f;
#pragma unroll
        for (int h = 0; h < HG; ++h) {
            if (h >= nh) break;
            float qi = q[(size_t)h * hd + i];
#pragma unroll
            for (int d = 0; d < DOTS; ++d)
                if (d < n) acc[h][d] = fmaf(qi, ki[d], acc[h][d]);
        }
    }
#pragma unroll
    for (int h = 0; h < HG; ++h)
#pragma unroll
        for (int d = 0; d < DOTS; ++d) {
            for (int o = 8; o > 0; o >>= 1) acc[h][d] += __shfl_down_sync(half, acc[h][d], o, 16);
            out[h][d] = acc[h][d];
        }
}

// One P.V step of the first L splits for the group's heads h < nh (probabilities `p + h * pcap`): PV_AHEAD entries' values of each split loaded from j on, then their FMAs in list order (entries past len left out).
template <int L, int HG>
__device__ __forceinline__ void sparse_attn_pv(float (*acc)[PV_SPLITS], const float* p, int pcap, int nh, const int* lst, const float* vc, int hd,
                                               int k0, int j, int split, int len) {
    // One head loads its probabilities beside the values; more heads read theirs at the FMA.
    constexpr int PL = HG == 1 ? L : 1;
    float vk[L][PV_AHEAD], pk[PL][PV_AHEAD];
#pragma unroll
    for (int g = 0; g < L; ++g) {
#pragma unroll
        for (int u = 0; u < PV_AHEAD; ++u) {
            int k = k0 + g * split + j + u;
            bool in = k < len;
            if constexpr (HG == 1) pk[g][u] = in ? p[k] : 0.0f;
            vk[g][u] = in ? vc[(size_t)lst[k] * hd] : 0.0f;
        }
    }
#pragma unroll
    for (int u = 0; u < PV_AHEAD; ++u) {
#pragma unroll
        for (int g = 0; g < L; ++g) {
            int k = k0 + g * split + j + u;
            if (k >= len) continue;
            if constexpr (HG == 1) {
                acc[0][g] = fmaf(pk[g][u], vk[g][u], acc[0][g]);
            } else {
#pragma unroll
                for (int h = 0; h < HG; ++h)
                    if (h < nh) acc[h][g] = fmaf(p[h * pcap + k], vk[g][u], acc[h][g]);
            }
        }
    }
}

// The body of `sparse_attn` (HG 1, CAP 2048) and `sparse_attn_heads4` (HG 4, CAP 1024): `list` and `probs` are scratch of `num_idx` and `HG * num_idx` values per block, used for lists longer than CAP: the row's present entries in list order and each head's probabilities.
template <int HG, int CAP>
__device__ __forceinline__ void sparse_attn_body(const float* q, const int* idx, const float* kv, const float* sink, float* o, int* list, float* probs,
                                                 int rows, int heads, int hd, int num_idx, float scale, int bf16_probs) {
    __shared__ int len_s;
    __shared__ float warp_max[HG][32];
    __shared__ float m_s[HG], den_s[HG];
    // A row's list, its present entries and each head's probabilities, in shared memory when the list fits.
    __shared__ int idx_s[CAP], lst_s[CAP];
    __shared__ float p_s[HG * CAP];
    bool fits = num_idx <= CAP;
    int lane = threadIdx.x & 15, group = threadIdx.x >> 4, groups = blockDim.x >> 4;
    int warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    int* lst = fits ? lst_s : list + (size_t)blockIdx.x * num_idx;
    float* p = fits ? p_s : probs + (size_t)blockIdx.x * HG * num_idx;
    int pcap = fits ? CAP : num_idx;
    int split = SPLIT;
#ifdef TF_FAULT_split_by_grid
    if (gridDim.x == 1) split = SPLIT / 2;
#endif
    int head_groups = (heads + HG - 1) / HG;
    for (int item = blockIdx.x; item < rows * head_groups; item += gridDim.x) {
        int r = item / head_groups, h0 = item % head_groups * HG, nh = min(HG, heads - h0);
        const int* ri = idx + (size_t)r * num_idx;
        if (fits) {
            for (int i = threadIdx.x; i < num_idx; i += blockDim.x) idx_s[i] = ri[i];
            __syncthreads();
            ri = idx_s;
        }
        // The present entries in list order, compacted by warp 0 with ballots.
        if (threadIdx.x < 32) {
            int n = 0;
            for (int base = 0; base < num_idx; base += 32) {
                int i = base + threadIdx.x;
                int e = i < num_idx ? ri[i] : -1;
#ifdef TF_FAULT_padding_reads_entry_0
                if (i < num_idx) e = max(e, 0);
#endif
                u32 mask = __ballot_sync(0xffffffffu, e >= 0);
                if (e >= 0) lst[n + __popc(mask & ((1u << threadIdx.x) - 1u))] = e;
                n += __popc(mask);
            }
            if (threadIdx.x == 0) len_s = n;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        int len = min(max(len_s, 0), num_idx);
        const float* qh = q + ((size_t)r * heads + h0) * hd;
        // Group g scores entries g, g + groups, ...: DOTS of them a step for every head, each dot's arithmetic its own.
        for (int k0 = 0; k0 < len; k0 += DOTS * groups) {
            int n = min(DOTS, (len - k0 - group + groups - 1) / groups);
            if (n <= 0) break;
            const float* keys[DOTS];
            float s[HG][DOTS];
#pragma unroll
            for (int d = 0; d < DOTS; ++d) keys[d] = kv + (size_t)lst[k0 + group + (d < n ? d : 0) * groups] * hd;
            sparse_attn_dots<HG>(qh, nh, keys, n, hd, lane, s);
#pragma unroll
            for (int h = 0; h < HG; ++h)
#pragma unroll
                for (int d = 0; d < DOTS; ++d)
                    if (lane == 0 && h < nh && d < n) p[h * pcap + k0 + group + d * groups] = s[h][d] * scale;
        }
        __syncthreads();
        // Each head's maximum (exact in any order), then exps in parallel and each head's sum in list order by one thread.
        float m[HG];
#pragma unroll
        for (int h = 0; h < HG; ++h) {
            m[h] = h < nh ? sink[h0 + h] : 0.0f;
#ifdef TF_FAULT_no_sink
            m[h] = __int_as_float(0xff800000);
#endif
            if (h < nh)
                for (int k = threadIdx.x; k < len; k += blockDim.x) m[h] = fmaxf(m[h], p[h * pcap + k]);
            for (int off = 16; off > 0; off >>= 1) m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], off));
            if ((threadIdx.x & 31) == 0) warp_max[h][warp] = m[h];
        }
        __syncthreads();
        if (threadIdx.x < nh) {
            float mm = warp_max[threadIdx.x][0];
            for (int w = 1; w < warps; ++w) mm = fmaxf(mm, warp_max[threadIdx.x][w]);
            m_s[threadIdx.x] = mm;
        }
        __syncthreads();
        for (int t = threadIdx.x; t < nh * len; t += blockDim.x) {
            int h = t / len, k = t % len;
            p[h * pcap + k] = tf_exp_cpu(p[h * pcap + k] - m_s[h]);
        }
        __syncthreads();
        // Lane 0 of warp w sums head w, w + warps, ...
        for (int h = warp; h < nh; h += warps) {
            if ((threadIdx.x & 31) != 0) continue;
            const float* ph = p + h * pcap;
            float den = 0.0f;
            int k = 0;
            for (; k + 8 <= len; k += 8) {
                float v[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) v[u] = ph[k + u];
#pragma unroll
                for (int u = 0; u < 8; ++u) den += v[u];
            }
            for (; k < len; ++k) den += ph[k];
#ifndef TF_FAULT_no_sink
            den += tf_exp_cpu(sink[h0 + h] - m_s[h]);
#endif
            den_s[h] = den;
        }
        __syncthreads();
        for (int t = threadIdx.x; t < nh * len; t += blockDim.x) {
            int h = t / len, k = t % len;
            float v = p[h * pcap + k] / den_s[h];
            p[h * pcap + k] = bf16_probs ? tf_bf16_to_f32(tf_f32_to_bf16(v)) : v;
        }
        __syncthreads();
        // P.V: each split's FMA chain in list order from zero, the splits added in order; PV_SPLITS splits' chains step side by side.
        for (int c = threadIdx.x; c < hd; c += blockDim.x) {
            float y[HG];
#pragma unroll
            for (int h = 0; h < HG; ++h) y[h] = 0.0f;
            for (int k0 = 0; k0 < len; k0 += PV_SPLITS * split) {
                float acc[HG][PV_SPLITS];
#pragma unroll
                for (int h = 0; h < HG; ++h)
#pragma unroll
                    for (int g = 0; g < PV_SPLITS; ++g) acc[h][g] = 0.0f;
                // Only splits holding entries step, and only while the first still does (a warp-uniform choice).
                int live = min(PV_SPLITS, (len - k0 + split - 1) / split);
                for (int j = 0; j < split && k0 + j < len; j += PV_AHEAD) {
                    const float* vc = kv + c;
                    switch (live) {
                    case 1: sparse_attn_pv<1, HG>(acc, p, pcap, nh, lst, vc, hd, k0, j, split, len); break;
                    case 2: sparse_attn_pv<2, HG>(acc, p, pcap, nh, lst, vc, hd, k0, j, split, len); break;
                    case 3: sparse_attn_pv<3, HG>(acc, p, pcap, nh, lst, vc, hd, k0, j, split, len); break;
                    default: sparse_attn_pv<PV_SPLITS, HG>(acc, p, pcap, nh, lst, vc, hd, k0, j, split, len); break;
                    }
                }
#pragma unroll
                for (int h = 0; h < HG; ++h)
#pragma unroll
                    for (int g = 0; g < PV_SPLITS; ++g) {
                        if (k0 + g * split < len) y[h] = k0 + g * split == 0 ? acc[h][g] : y[h] + acc[h][g];
                    }
            }
#pragma unroll
            for (int h = 0; h < HG; ++h)
                if (h < nh) o[((size_t)r * heads + h0 + h) * hd + c] = y[h];
        }
        __syncthreads();
    }
}

extern "C" __global__ void sparse_attn(const float* q, const int* idx, const float* kv, const float* sink, float* o, int* list, float* probs, int rows,
                                       int heads, int hd, int num_idx, float scale, int bf16_probs) {
    tf_grid_begin();
    sparse_attn_body<1, 2048>(q, idx, kv, sink, o, list, probs, rows, heads, hd, num_idx, scale, bf16_probs);
}

// Registers capped for the largest block the records launch.
extern "C" __global__ void __launch_bounds__(512) sparse_attn_heads4(const float* q, const int* idx, const float* kv, const float* sink, float* o, int* list, float* probs,
                                              int rows, int heads, int hd, int num_idx, float scale, int bf16_probs) {
    tf_grid_begin();
    sparse_attn_body<4, 1024>(q, idx, kv, sink, o, list, probs, rows, heads, hd, num_idx, scale, bf16_probs);
}
