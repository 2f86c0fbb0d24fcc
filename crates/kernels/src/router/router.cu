// router: one block per row; sqrt-softplus scores in shared memory, then one thread's insertion top-k in expert order (ties: lower id).
#define MAX_EXPERTS 1024
#define MAX_TOPK 32

extern "C" __global__ void router(const float* logits, const float* bias, i32* idx, float* weights, int rows, int experts, int k,
                                  float scale) {
    __shared__ float scores[MAX_EXPERTS];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int e = threadIdx.x; e < experts; e += blockDim.x) scores[e] = sqrtf(tf_softplus(logits[(size_t)r * experts + e]));
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (threadIdx.x == 0) {
            int best_idx[MAX_TOPK];
            float best_val[MAX_TOPK];
            int len = 0;
            for (int e = 0; e < experts; ++e) {
                float v = scores[e] + bias[e];
#ifdef TF_FAULT_skip_bias
                v = scores[e];
#endif
                if (len == k && !(v > best_val[k - 1])) continue;
                int p = min(len, k - 1);
                while (p > 0 && v > best_val[p - 1]) {
                    best_idx[p] = best_idx[p - 1];
                    best_val[p] = best_val[p - 1];
                    --p;
                }
                best_idx[p] = e;
                best_val[p] = v;
                len = min(len + 1, k);
            }
            int used = k;
#ifdef TF_FAULT_drop_last_in_sum
            used = k - 1;
#endif
            float sum = 0.0f;
            for (int j = 0; j < used; ++j) sum += scores[best_idx[j]];
            for (int j = 0; j < k; ++j) {
                idx[(size_t)r * k + j] = best_idx[j];
                weights[(size_t)r * k + j] = scores[best_idx[j]] / sum * scale;
            }
        }
        __syncthreads();
    }
}
