// hash_router: one block per row; slot j's weight sqrt(softplus(z[e_j])) in shared memory, summed in slot order by one thread.
#define MAX_TOPK 32

extern "C" __global__ void hash_router(const float* logits, const i32* token_ids, const i32* tid2eid, i32* idx, float* weights,
                                       int rows, int experts, int k, int vocab, float scale) {
    __shared__ float w[MAX_TOPK];
    __shared__ float sum;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        int token = token_ids[r];
#ifdef TF_FAULT_off_by_one_token
        token = (token + 1) % vocab;
#endif
        bool valid_token = token >= 0 && token < vocab;
        for (int j = threadIdx.x; j < k; j += blockDim.x) {
            int e = valid_token ? tid2eid[(size_t)token * k + j] : -1;
            bool valid = e >= 0 && e < experts;
            idx[(size_t)r * k + j] = e;
            w[j] = valid ? sqrtf(tf_softplus(logits[(size_t)r * experts + e])) : __int_as_float(0x7fc00000);
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (threadIdx.x == 0) {
            int used = k;
#ifdef TF_FAULT_drop_last_in_sum
            used = k - 1;
#endif
            float s = 0.0f;
            for (int j = 0; j < used; ++j) s += w[j];
            sum = s;
        }
        __syncthreads();
        for (int j = threadIdx.x; j < k; j += blockDim.x) weights[(size_t)r * k + j] = w[j] / sum * scale;
        __syncthreads();
    }
}
