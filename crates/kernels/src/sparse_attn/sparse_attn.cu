// sparse_attn: one block per (row, head) (items past the grid loop), its list in shared memory up to LIST_CAP; scores by half-warps with the CPU's 16 dot lanes, the softmax with sink in list order, then P.V in fixed 64-entry splits summed in split order, so no bit depends on the grid or block size.
#define SPLIT 64
// P.V splits whose chains one thread steps side by side.
#define PV_SPLITS 4

// Entries one half-warp scores side by side.
#define DOTS 4
// Entries whose values a P.V step loads before its FMAs, per split.
#define PV_AHEAD 8
// Longest list a block keeps in shared memory; longer ones live in the global scratch.
#define LIST_CAP 2048
static_assert((SPLIT / 2) % PV_AHEAD == 0, "a P.V step stays inside one split, the planted half split included");

// q . k of up to DOTS entries `k[d]` (d < n) in 16 lanes each (lane j takes elements j, j + 16, ...), then the fixed tree (j, j+8), (j, j+4), (j, j+2), (0, 1); lane 0 of the half-warp holds them.
__device__ __forceinline__ void sparse_attn_dots(const float* q, const float* const* k, int n, int hd, int lane, float* out) {
    unsigned half = 0xffffu << (threadIdx.x & 16);
    float acc[DOTS];
#pragma unroll
    for (int d = 0; d < DOTS; ++d) acc[d] = 0.0f;
#pragma unroll 8
    for (int i = lane; i < hd; i += 16) {
        float qi = q[i];
#pragma unroll
        for (int d = 0; d < DOTS; ++d)
            if (d < n) acc[d] = fmaf(qi, k[d][i], acc[d]);
    }
#pragma unroll
    for (int d = 0; d < DOTS; ++d) {
        for (int o = 8; o > 0; o >>= 1) acc[d] += __shfl_down_sync(half, acc[d], o, 16);
        out[d] = acc[d];
    }
}

// One P.V step of the first L splits: PV_AHEAD entries of each loaded from j on, then their FMAs in list order (entries past len left out).
template <int L>
__device__ __forceinline__ void sparse_attn_pv(float* acc, const float* p, const int* lst, const float* vc, int hd, int k0, int j, int split,
                                               int len) {
    float pk[L][PV_AHEAD], vk[L][PV_AHEAD];
#pragma unroll
    for (int g = 0; g < L; ++g) {
#pragma unroll
        for (int u = 0; u < PV_AHEAD; ++u) {
            int k = k0 + g * split + j + u;
            bool in = k < len;
            pk[g][u] = in ? p[k] : 0.0f;
            vk[g][u] = in ? vc[(size_t)lst[k] * hd] : 0.0f;
        }
    }
#pragma unroll
    for (int u = 0; u < PV_AHEAD; ++u) {
#pragma unroll
        for (int g = 0; g < L; ++g)
            if (k0 + g * split + j + u < len) acc[g] = fmaf(pk[g][u], vk[g][u], acc[g]);
    }
}

// `list` and `probs` are scratch of `num_idx` values per block, used for lists longer than LIST_CAP: the row's present entries in list order and their probabilities.
extern "C" __global__ void sparse_attn(const float* q, const int* idx, const float* kv, const float* sink, float* o, int* list,
                                       float* probs, int rows, int heads, int hd, int num_idx, float scale, int bf16_probs) {
    tf_grid_begin();
    __shared__ int len_s;
    __shared__ float warp_max[32];
    __shared__ float m_s, den_s;
    // A row's list, its present entries and their probabilities, in shared memory when the list fits.
    __shared__ int idx_s[LIST_CAP], lst_s[LIST_CAP];
    __shared__ float p_s[LIST_CAP];
    bool fits = num_idx <= LIST_CAP;
    int lane = threadIdx.x & 15, group = threadIdx.x >> 4, groups = blockDim.x >> 4;
    int* lst = fits ? lst_s : list + (size_t)blockIdx.x * num_idx;
    float* p = fits ? p_s : probs + (size_t)blockIdx.x * num_idx;
    int split = SPLIT;
#ifdef TF_FAULT_split_by_grid
    if (gridDim.x == 1) split = SPLIT / 2;
#endif
    for (int item = blockIdx.x; item < rows * heads; item += gridDim.x) {
        int r = item / heads, h = item % heads;
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
        const float* qh = q + (size_t)item * hd;
        // Group g scores entries g, g + groups, ...: DOTS of them a step, each dot's arithmetic its own.
        for (int k0 = 0; k0 < len; k0 += DOTS * groups) {
            int n = min(DOTS, (len - k0 - group + groups - 1) / groups);
            if (n <= 0) break;
            const float* keys[DOTS];
            float s[DOTS];
#pragma unroll
            for (int d = 0; d < DOTS; ++d) keys[d] = kv + (size_t)lst[k0 + group + (d < n ? d : 0) * groups] * hd;
            sparse_attn_dots(qh, keys, n, hd, lane, s);
#pragma unroll
            for (int d = 0; d < DOTS; ++d)
                if (lane == 0 && d < n) p[k0 + group + d * groups] = s[d] * scale;
        }
        __syncthreads();
        // The maximum (exact in any order), then exps in parallel and their sum in list order by one thread.
        float sk = sink[h];
        float m = sk;
#ifdef TF_FAULT_no_sink
        m = __int_as_float(0xff800000);
#endif
        for (int k = threadIdx.x; k < len; k += blockDim.x) m = fmaxf(m, p[k]);
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            float mm = warp_max[0];
            for (int w = 1; w < (blockDim.x + 31) >> 5; ++w) mm = fmaxf(mm, warp_max[w]);
            m_s = mm;
        }
        __syncthreads();
        m = m_s;
        for (int k = threadIdx.x; k < len; k += blockDim.x) p[k] = tf_exp_cpu(p[k] - m);
        __syncthreads();
        if (threadIdx.x == 0) {
            float den = 0.0f;
            int k = 0;
            for (; k + 8 <= len; k += 8) {
                float v[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) v[u] = p[k + u];
#pragma unroll
                for (int u = 0; u < 8; ++u) den += v[u];
            }
            for (; k < len; ++k) den += p[k];
#ifndef TF_FAULT_no_sink
            den += tf_exp_cpu(sk - m);
#endif
            den_s = den;
        }
        __syncthreads();
        float den = den_s;
        for (int k = threadIdx.x; k < len; k += blockDim.x) {
            float v = p[k] / den;
            p[k] = bf16_probs ? tf_bf16_to_f32(tf_f32_to_bf16(v)) : v;
        }
        __syncthreads();
        // P.V: each split's FMA chain in list order from zero, the splits added in order; PV_SPLITS splits' chains step side by side.
        for (int c = threadIdx.x; c < hd; c += blockDim.x) {
            float y = 0.0f;
            for (int k0 = 0; k0 < len; k0 += PV_SPLITS * split) {
                float acc[PV_SPLITS];
#pragma unroll
                for (int g = 0; g < PV_SPLITS; ++g) acc[g] = 0.0f;
                // Only splits holding entries step, and only while the first still does (a warp-uniform choice).
                int live = min(PV_SPLITS, (len - k0 + split - 1) / split);
                for (int j = 0; j < split && k0 + j < len; j += PV_AHEAD) {
                    const float* vc = kv + c;
                    switch (live) {
                    case 1: sparse_attn_pv<1>(acc, p, lst, vc, hd, k0, j, split, len); break;
                    case 2: sparse_attn_pv<2>(acc, p, lst, vc, hd, k0, j, split, len); break;
                    case 3: sparse_attn_pv<3>(acc, p, lst, vc, hd, k0, j, split, len); break;
                    default: sparse_attn_pv<PV_SPLITS>(acc, p, lst, vc, hd, k0, j, split, len); break;
                    }
                }
#pragma unroll
                for (int g = 0; g < PV_SPLITS; ++g) {
                    if (k0 + g * split < len) y = k0 + g * split == 0 ? acc[g] : y + acc[g];
                }
            }
            o[(size_t)item * hd + c] = y;
        }
        __syncthreads();
    }
}
