// embedding: one block per token row (rows past the grid loop), the token id broadcast through shared memory.
extern "C" __global__ void embedding(const u8* table, const i32* ids, float* y, int rows, int dim, int vocab) {
    tf_grid_begin();
    __shared__ int id;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        if (threadIdx.x == 0) {
            int v = ids[r];
#ifdef TF_FAULT_id_off_by_one
            v = (v + 1) % vocab;
#endif
            id = v;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        int v = id;
        bool valid = v >= 0 && v < vocab;
        const u8* row = table + 2 * (size_t)(valid ? v : 0) * dim;
        for (int j = threadIdx.x; j < dim; j += blockDim.x) {
            u16 bits = (u16)row[2 * j] | ((u16)row[2 * j + 1] << 8);
            y[(size_t)r * dim + j] = valid ? tf_bf16_to_f32(bits) : __int_as_float(0x7fc00000);
        }
        __syncthreads();
    }
}
