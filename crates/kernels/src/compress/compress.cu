// compress: one block per entry row (rows past the grid loop), one thread per channel; slots in fixed order, so any block size gives the same bits.
#define MAX_SLOTS 256

// Slot s's table row (-1: masked; kept below num_tokens) and, when present, its first dim and its logit gate + ape at channel c.
__device__ __forceinline__ int compress_slot(const int* tokens, const float* gate, const float* ape, int s, int c, int ratio,
                                             int hd, int overlap, int num_tokens, int* d, float* z) {
    int t = min(tokens[s], num_tokens - 1);
#ifdef TF_FAULT_unmasked_slot
    t = max(t, 0);
#endif
    if (t < 0) return t;
    int width = overlap ? 2 * hd : hd;
    *d = (overlap && s >= ratio) ? hd : 0;
    int ad = *d;
#ifdef TF_FAULT_ape_same_half
    ad = 0;
#endif
    *z = gate[(size_t)t * width + *d + c] + ape[(size_t)(s % ratio) * width + ad + c];
    return t;
}

extern "C" __global__ void compress(const float* kv, const float* gate, const float* ape, const int* token_idx, float* out,
                                    int rows, int num_tokens, int ratio, int hd, int overlap) {
    tf_grid_begin();
    __shared__ int tokens[MAX_SLOTS];
    int width = overlap ? 2 * hd : hd;
    int slots = overlap ? 2 * ratio : ratio;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        for (int s = threadIdx.x; s < slots; s += blockDim.x) tokens[s] = token_idx[(size_t)r * slots + s];
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int c = threadIdx.x; c < hd; c += blockDim.x) {
            float m = __int_as_float(0xff800000), z = 0.0f;
            int d = 0;
            for (int s = 0; s < slots; ++s)
                if (compress_slot(tokens, gate, ape, s, c, ratio, hd, overlap, num_tokens, &d, &z) >= 0) m = fmaxf(m, z);
            float den = 0.0f;
            for (int s = 0; s < slots; ++s)
                if (compress_slot(tokens, gate, ape, s, c, ratio, hd, overlap, num_tokens, &d, &z) >= 0) den += tf_exp_cpu(z - m);
            float acc = 0.0f;
            for (int s = 0; s < slots; ++s) {
                int t = compress_slot(tokens, gate, ape, s, c, ratio, hd, overlap, num_tokens, &d, &z);
                if (t >= 0) acc = fmaf(tf_exp_cpu(z - m) / den, kv[(size_t)t * width + d + c], acc);
            }
            out[(size_t)r * hd + c] = acc;
        }
        __syncthreads();
    }
}
