// hash_router: one thread per (row, slot), a block's slots staged in shared memory; thread q sums row q's weights in slot order.
#define MAX_BLOCK 1024

extern "C" __global__ void hash_router(const float* logits, const i32* token_ids, const i32* tid2eid, i32* idx, float* weights,
                                       int rows, int experts, int k, int vocab, float scale) {
    tf_grid_begin();
    __shared__ float w[MAX_BLOCK];
    __shared__ float sums[MAX_BLOCK];
    int rows_per_block = blockDim.x / k;
    int groups = (rows + rows_per_block - 1) / rows_per_block;
    for (int g = blockIdx.x; g < groups; g += gridDim.x) {
        int t = threadIdx.x, r = g * rows_per_block + t / k, j = t % k;
        bool active = t < rows_per_block * k && r < rows;
        if (active) {
            int token = token_ids[r];
#ifdef TF_FAULT_off_by_one_token
            token = (token + 1) % vocab;
#endif
            int e = token >= 0 && token < vocab ? tid2eid[(size_t)token * k + j] : -1;
            idx[(size_t)r * k + j] = e;
            w[t] = e >= 0 && e < experts ? sqrtf(tf_softplus(logits[(size_t)r * experts + e])) : __int_as_float(0x7fc00000);
        }
        __syncthreads();
        if (threadIdx.x < min(rows_per_block, rows - g * rows_per_block)) {
            int used = k, q = threadIdx.x;
#ifdef TF_FAULT_drop_last_in_sum
            used = k - 1;
#endif
            float s = 0.0f;
            for (int j2 = 0; j2 < used; ++j2) s += w[q * k + j2];
            sums[q * k] = s;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (active) weights[(size_t)r * k + j] = w[t] / sums[t - j] * scale;
        __syncthreads();
    }
}
