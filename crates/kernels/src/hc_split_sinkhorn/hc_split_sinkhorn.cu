// hc_split_sinkhorn: hc <= 4 a warp per row (tf_sinkhorn_small), else one block per row; pre and post by sigmoid, comb by a row softmax then Sinkhorn passes, one warp per comb row and then one per column.
#define MAX_HC 16

__device__ __forceinline__ float tf_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Row r's sums of four-lane groups (xor 2, then 1) and column sums across the groups (xor 8, then 4): the adds tf_warp_sum makes over hc <= 4 lanes, the lanes past hc adding zeros.
__device__ __forceinline__ float tf_sum_row4(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return v + __shfl_xor_sync(0xffffffffu, v, 1);
}
__device__ __forceinline__ float tf_sum_col4(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    return v + __shfl_xor_sync(0xffffffffu, v, 4);
}

// hc <= 4: one warp a row, lane 4 i + j holding comb[i][j], so a Sinkhorn pass is four shuffles and no barrier; the same bits as the block path.
__device__ __forceinline__ void tf_sinkhorn_small(const float* m, const float* scale, const float* base, float* pre, float* post, float* comb,
                                                  int hc, int iters, float eps, float comb_scale) {
    int lane = threadIdx.x % 32, i = lane / 4, j = lane % 4;
    if (lane < hc) {
        pre[lane] = tf_sigmoid(fmaf(m[lane], scale[0], base[lane])) + eps;
        post[lane] = 2.0f * tf_sigmoid(fmaf(m[hc + lane], scale[1], base[hc + lane]));
    }
    bool on = lane < 16 && i < hc && j < hc;
    float v = on ? fmaf(m[2 * hc + i * hc + j], comb_scale, base[2 * hc + i * hc + j]) : -__int_as_float(0x7f800000);
    float mx = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    float e = on ? expf(v - mx) : 0.0f;
    float sum = tf_sum_row4(e);
    float c = on ? e / sum + eps : 0.0f;
    for (int it = 0; it < iters; ++it) {
        if (it > 0) {
            float denom = tf_sum_row4(c) + eps;
            c = on ? c / denom : 0.0f;
        }
        float denom = tf_sum_col4(c) + eps;
        c = on ? c / denom : 0.0f;
    }
    if (on) comb[i * hc + j] = c;
}

extern "C" __global__ void hc_split_sinkhorn(const float* mix, const float* scale, const float* base, float* pre, float* post,
                                             float* comb, int rows, int hc, int iters, float eps) {
    tf_grid_begin();
    __shared__ float c[MAX_HC * MAX_HC];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int width = (2 + hc) * hc;
    float comb_scale = scale[2];
#ifdef TF_FAULT_lost_comb_scale
    comb_scale = 1.0f;
#endif
    if (hc <= 4) {
        bool skip_last = false;
#ifdef TF_FAULT_skip_last_row
        skip_last = true;
#endif
        for (int r = blockIdx.x * warps + warp; r < rows; r += gridDim.x * warps) {
            float* cr = skip_last && r == rows - 1 ? c : comb + (size_t)r * hc * hc;
            tf_sinkhorn_small(mix + (size_t)r * width, scale, base, pre + (size_t)r * hc, post + (size_t)r * hc, cr, hc, iters, eps, comb_scale);
        }
        return;
    }
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* m = mix + (size_t)r * width;
        for (int j = threadIdx.x; j < hc; j += blockDim.x) {
            pre[(size_t)r * hc + j] = tf_sigmoid(fmaf(m[j], scale[0], base[j])) + eps;
            post[(size_t)r * hc + j] = 2.0f * tf_sigmoid(fmaf(m[hc + j], scale[1], base[hc + j]));
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
