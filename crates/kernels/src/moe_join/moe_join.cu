// moe_join: one block per row; a tile of 32 columns of every slot staged in shared memory, then summed per column in slot order, shared last.
#define MAX_SLOTS 16
#define TILE 32

extern "C" __global__ void moe_join(const float* routed, const float* shared_rows, float* y, int rows, int k, int dim) {
    __shared__ float stage[MAX_SLOTS][TILE];
    int slots = k;
#ifdef TF_FAULT_drop_last_slot
    slots = k - 1;
#endif
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int base = 0; base < dim; base += TILE) {
            int cols = min(TILE, dim - base);
            for (int t = threadIdx.x; t < slots * TILE; t += blockDim.x) {
                int j = t / TILE, c = t % TILE;
                if (c < cols) stage[j][c] = routed[((size_t)r * k + j) * dim + base + c];
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            if (threadIdx.x < cols) {
                int c = threadIdx.x;
                float acc = slots > 0 ? stage[0][c] : 0.0f;
                for (int j = 1; j < slots; ++j) acc += stage[j][c];
                y[(size_t)r * dim + base + c] = acc + shared_rows[(size_t)r * dim + base + c];
            }
            __syncthreads();
        }
    }
}
