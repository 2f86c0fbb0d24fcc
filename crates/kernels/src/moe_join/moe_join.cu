// moe_join: one block per row and tile of 32 columns; the tile of every slot staged in shared memory, then summed per column in slot order, shared last.
#define MAX_SLOTS 16
#define TILE 32

extern "C" __global__ void moe_join(const float* routed, const float* shared_rows, float* y, int rows, int k, int dim) {
    tf_grid_begin();
    __shared__ float stage[MAX_SLOTS][TILE];
    int slots = k;
#ifdef TF_FAULT_drop_last_slot
    slots = k - 1;
#endif
    int tiles = (dim + TILE - 1) / TILE;
    for (int t = blockIdx.x; t < rows * tiles; t += gridDim.x) {
        int r = t / tiles, base = (t % tiles) * TILE;
        int cols = min(TILE, dim - base);
        for (int i = threadIdx.x; i < slots * TILE; i += blockDim.x) {
            int j = i / TILE, c = i % TILE;
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
