// index_scores: one block per (query row, key column); one half-warp per head's dot (the CPU's 16 dot lanes and halving tree) and weight into shared memory, then the heads summed in order.
#define MAX_HEADS 512

// q . k in 16 lanes (lane j takes elements j, j + 16, ...), then the fixed tree (j, j+8), (j, j+4), (j, j+2), (0, 1); lane 0 of the half-warp holds it.
__device__ __forceinline__ float index_scores_dot(const float* q, const float* k, int hd, int lane) {
    unsigned half = 0xffffu << (threadIdx.x & 16);
    float acc = tf_strided_dot(q, k, hd, lane, 16, 0.0f);
    for (int o = 8; o > 0; o >>= 1) acc += __shfl_down_sync(half, acc, o, 16);
    return acc;
}

extern "C" __global__ void index_scores(const float* q, const float* w, const int* key_range, const float* keys, float* out,
                                        int rows, int heads, int hd, int cols, float weight_scale) {
    tf_grid_begin();
    __shared__ float dots[MAX_HEADS];
    __shared__ float weights[MAX_HEADS];
    int lane = threadIdx.x & 15, group = threadIdx.x >> 4, groups = blockDim.x >> 4;
    for (long t = blockIdx.x; t < (long)rows * cols; t += gridDim.x) {
        int r = (int)(t / cols), col = (int)(t % cols);
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        int start = key_range[2 * r], visible = key_range[2 * r + 1];
#ifdef TF_FAULT_visible_off_by_one
        visible += 1;
#endif
        if (col >= visible) {
            if (threadIdx.x == 0) out[(size_t)r * cols + col] = __int_as_float(0xff800000);
            continue;
        }
        const float* k = keys + (size_t)(start + col) * hd;
        // Every lane of a half-warp runs the same trip count, so the shuffles see all 16 lanes.
        for (int h = group; h < heads; h += groups) {
            float s = index_scores_dot(q + ((size_t)r * heads + h) * hd, k, hd, lane);
#ifndef TF_FAULT_no_relu
            s = s > 0.0f ? s : 0.0f;
#endif
            if (lane == 0) {
                dots[h] = s;
                weights[h] = w[(size_t)r * heads + h] * weight_scale;
            }
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (threadIdx.x == 0) {
            float acc = 0.0f;
            for (int h = 0; h < heads; ++h) acc = fmaf(weights[h], dots[h], acc);
            out[(size_t)r * cols + col] = acc;
        }
        __syncthreads();
    }
}
