// engram_hash: one block per token row; the last warp chains the row's xor of token * multiplier into shared memory, then each head's thread takes one modulo and its offset.
#define MAX_NGRAM 8

extern "C" __global__ void engram_hash(const i32* tokens, const u64* mults, const i32* primes, const u64* offsets, i32* out,
                                       int rows, int max_ngram, int n_heads) {
    tf_grid_begin();
    __shared__ u64 mix[MAX_NGRAM];
    int heads = (max_ngram - 1) * n_heads;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        if (threadIdx.x == blockDim.x - 32) {
            const i32* t = tokens + (size_t)r * max_ngram;
            u64 m = (u64)t[0] * mults[0];
            for (int n = 1; n < max_ngram; ++n) {
                m ^= (u64)t[n] * mults[n];
                mix[n] = m;
            }
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int h = threadIdx.x; h < heads; h += blockDim.x) {
            u64 row = mix[h / n_heads + 1] % (u64)primes[h];
#ifndef TF_FAULT_no_offset
            row += offsets[h];
#endif
            out[(size_t)r * heads + h] = (i32)row;
        }
        __syncthreads();
    }
}
