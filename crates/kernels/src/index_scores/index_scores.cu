// index_scores: one block per query row (rows past the grid loop), its queries in shared memory; one half-warp per key column, the CPU's 16 dot lanes and halving tree, heads summed in order.
#define MAX_Q 8192

// q . k in 16 lanes (lane j takes elements j, j + 16, ...), then the fixed tree (j, j+8), (j, j+4), (j, j+2), (0, 1); lane 0 of the half-warp holds it.
__device__ __forceinline__ float index_scores_dot(const float* q, const float* k, int hd, int lane) {
    unsigned half = 0xffffu << (threadIdx.x & 16);
    float acc = 0.0f;
    for (int i = lane; i < hd; i += 16) acc = fmaf(q[i], k[i], acc);
    for (int o = 8; o > 0; o >>= 1) acc += __shfl_down_sync(half, acc, o, 16);
    return acc;
}

extern "C" __global__ void index_scores(const float* q, const float* w, const int* key_range, const float* keys, float* out,
                                        int rows, int heads, int hd, int cols) {
    __shared__ float qs[MAX_Q];
    int lane = threadIdx.x & 15, group = threadIdx.x >> 4, groups = blockDim.x >> 4;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        for (int i = threadIdx.x; i < heads * hd; i += blockDim.x) qs[i] = q[(size_t)r * heads * hd + i];
        __syncthreads();
        int start = key_range[2 * r], visible = key_range[2 * r + 1];
#ifdef TF_FAULT_visible_off_by_one
        visible += 1;
#endif
        // Every lane of a half-warp runs the same trip count, so the shuffles see all 16 lanes.
        for (int col0 = 0; col0 < cols; col0 += groups) {
            int col = col0 + group;
            if (col >= cols) break;
            if (col >= visible) {
                if (lane == 0) out[(size_t)r * cols + col] = __int_as_float(0xff800000);
                continue;
            }
            const float* k = keys + (size_t)(start + col) * hd;
            float acc = 0.0f;
            for (int h = 0; h < heads; ++h) {
                float s = index_scores_dot(qs + h * hd, k, hd, lane);
#ifndef TF_FAULT_no_relu
                s = s > 0.0f ? s : 0.0f;
#endif
                acc = fmaf(w[(size_t)r * heads + h], s, acc);
            }
            if (lane == 0) out[(size_t)r * cols + col] = acc;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
    }
}
