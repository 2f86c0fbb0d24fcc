// hc_split_sinkhorn: one block per row; pre and post by sigmoid, comb by a row softmax then Sinkhorn passes, one warp per comb row and then one per column (hc <= 4: warp 0 alone, lane 4i + j holding c[i][j]).
#define MAX_HC 16

__device__ __forceinline__ float tf_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float tf_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// v plus its partner `hi` lanes away, then plus that sum's partner `lo` lanes away: tf_warp_sum's pairing of lanes 0..3.
__device__ __forceinline__ float tf_pair_sum(float v, int hi, int lo) {
    v += __shfl_xor_sync(0xffffffffu, v, hi);
    return v + __shfl_xor_sync(0xffffffffu, v, lo);
}

// Row r's comb for hc <= 4 in one warp, with tf_warp_sum's pairings ((c0 + c2) + (c1 + c3), absent terms zero) and no barriers.
__device__ __forceinline__ void tf_sinkhorn_warp(const float* m, const float* base, float comb_scale, float* comb, int hc, int iters,
                                                 float eps, bool skip) {
    int lane = threadIdx.x % 32, i = lane / 4, j = lane % 4;
    bool on = lane < 16 && i < hc && j < hc;
    float v = on ? fmaf(m[2 * hc + i * hc + j], comb_scale, base[2 * hc + i * hc + j]) : -__int_as_float(0x7f800000);
    float mx = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    float e = on ? expf(v - mx) : 0.0f;
    float sum = tf_pair_sum(e, 2, 1);
    float c = on ? e / sum + eps : 0.0f;
    for (int it = 0; it < iters; ++it) {
        if (it > 0) {
            float denom = tf_pair_sum(c, 2, 1) + eps;
            c = on ? c / denom : 0.0f;
        }
        float denom = tf_pair_sum(c, 8, 4) + eps;
        c = on ? c / denom : 0.0f;
    }
    if (on && !skip) comb[i * hc + j] = c;
}

extern "C" __global__ void hc_split_sinkhorn(const float* mix, const float* scale, const float* base, float* pre, float* post,
                                             float* comb, int rows, int hc, int iters, float eps) {
    __shared__ float c[MAX_HC * MAX_HC];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int width = (2 + hc) * hc;
    float comb_scale = scale[2];
#ifdef TF_FAULT_lost_comb_scale
    comb_scale = 1.0f;
#endif
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* m = mix + (size_t)r * width;
        for (int j = threadIdx.x; j < hc; j += blockDim.x) {
            pre[(size_t)r * hc + j] = tf_sigmoid(fmaf(m[j], scale[0], base[j])) + eps;
            post[(size_t)r * hc + j] = 2.0f * tf_sigmoid(fmaf(m[hc + j], scale[1], base[hc + j]));
        }
        if (hc <= 4) {
            bool skip = false;
#ifdef TF_FAULT_skip_last_row
            skip = r == rows - 1;
#endif
            if (warp == 0) tf_sinkhorn_warp(m, base, comb_scale, comb + (size_t)r * hc * hc, hc, iters, eps, skip);
            continue;
        }
        for (int i = warp; i < hc; i += warps) {
            bool on = lane < hc;
            float v = on ? fmaf(m[2 * hc + i * hc + lane], comb_scale, base[2 * hc + i * hc + lane]) : -__int_as_float(0x7f800000);
            float mx = tf_warp_max(v);
            float e = on ? expf(v - mx) : 0.0f;
            float sum = tf_warp_sum(e);
            if (on) c[i * hc + lane] = e / sum + eps;
        }
        for (int it = 0; it < iters; ++it) {
            if (it > 0) {
                __syncthreads();
                for (int i = warp; i < hc; i += warps) {
                    float v = lane < hc ? c[i * hc + lane] : 0.0f;
                    float denom = tf_warp_sum(v) + eps;
                    if (lane < hc) c[i * hc + lane] = v / denom;
                }
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            for (int j = warp; j < hc; j += warps) {
                float v = lane < hc ? c[lane * hc + j] : 0.0f;
                float denom = tf_warp_sum(v) + eps;
                if (lane < hc) c[lane * hc + j] = v / denom;
            }
        }
        __syncthreads();
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        for (int t = threadIdx.x; t < hc * hc && !skip; t += blockDim.x) comb[(size_t)r * hc * hc + t] = c[t];
        __syncthreads();
    }
}
