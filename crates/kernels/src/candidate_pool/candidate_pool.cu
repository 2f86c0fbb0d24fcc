// candidate_pool: one block per query row; warp 0 ranks keys (block max, lower block first) into shared memory, then every thread counts the keys above its blocks, and the chosen blocks find their ascending slot.
#define MAX_BLOCKS 4096

// The CPU's rank_key: an order-preserving u32 of the score over an inverted block index (lower blocks win ties).
__device__ __forceinline__ u64 pool_key(float score, int b) {
    u32 bits = score == 0.0f ? 0u : __float_as_uint(score);
    u32 ordered = (bits >> 31) ? ~bits : (bits | 0x80000000u);
    return ((u64)ordered << 32) | (u64)(0xffffffffu - (u32)b);
}

extern "C" __global__ void candidate_pool(const float* scores, const i32* num_visible, i32* out, int rows, int cols,
                                          int block_size, int top_blocks) {
    tf_grid_begin();
    __shared__ u64 keys[MAX_BLOCKS];
    __shared__ u8 chosen[MAX_BLOCKS];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        int visible = min(max(num_visible[r], 0), cols);
        int nb = (visible + block_size - 1) / block_size;
        i32* y = out + (size_t)r * top_blocks;
        if (nb <= top_blocks) {
            for (int i = threadIdx.x; i < top_blocks; i += blockDim.x) y[i] = i < nb ? i : -1;
        } else {
            const float* s = scores + (size_t)r * cols;
            for (int b = threadIdx.x; b < nb && threadIdx.x < 32; b += 32) {
                float m = -__int_as_float(0x7f800000);
                for (int j = b * block_size; j < min(visible, (b + 1) * block_size); ++j) m = fmaxf(m, s[j]);
                u64 k = pool_key(m, b);
#ifndef TF_FAULT_newest_not_forced
                if (b == nb - 1) k |= 0xffffffff00000000ull;
#endif
                keys[b] = k;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            for (int b = threadIdx.x; b < nb; b += blockDim.x) {
                u64 k = keys[b];
                int above = 0;
                for (int j = 0; j < nb; ++j) above += keys[j] > k;
                chosen[b] = above < top_blocks;
            }
            __syncthreads();
            for (int b = threadIdx.x; b < nb; b += blockDim.x) {
                if (!chosen[b]) continue;
                int slot = 0;
                for (int j = 0; j < b; ++j) slot += chosen[j];
                y[slot] = b;
            }
        }
        __syncthreads();
    }
}
