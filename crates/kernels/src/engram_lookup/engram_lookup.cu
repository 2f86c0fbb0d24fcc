// engram_lookup: one block per token row; warp 0 checks the row's table ids into shared memory, then every thread widens codes times scales.
#define MAX_HEADS 64
#define SCALE_BLOCK 32

extern "C" __global__ void engram_lookup(const u8* table, const u8* scales, const i32* ids, float* out, int rows, int heads,
                                         int dim, int table_rows) {
    tf_grid_begin();
    __shared__ int row_ids[MAX_HEADS];
    int blocks = dim / SCALE_BLOCK;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        if (threadIdx.x < 32) {
            for (int h = threadIdx.x; h < heads; h += 32) {
                int id = ids[(size_t)r * heads + h];
                row_ids[h] = id >= 0 && id < table_rows ? id : -1;
            }
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int i = threadIdx.x; i < heads * dim; i += blockDim.x) {
            int h = i / dim, j = i % dim;
            int id = row_ids[h];
            int b = j / SCALE_BLOCK;
#ifdef TF_FAULT_scale_next_block
            b = (b + 1) % blocks;
#endif
            float v = __int_as_float(0x7fc00000);
            if (id >= 0) v = tf_e4m3_to_f32(table[(size_t)id * dim + j]) * tf_e8m0_to_f32(scales[(size_t)id * blocks + b]);
            out[((size_t)r * heads + h) * dim + j] = v;
        }
        __syncthreads();
    }
}
