// dspark_markov: one block per draft row; warp 0 widens the previous token's Markov embedding into shared memory, then one warp per vocab entry: 32 fixed lanes and a butterfly sum.
#define MAX_RANK 1024

extern "C" __global__ void dspark_markov(const u8* embed, const u8* head, const i32* prev, float* logits, int rows, int vocab,
                                         int rank) {
    tf_grid_begin();
    __shared__ float e[MAX_RANK];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        if (warp == 0) {
            int t = prev[r];
#ifdef TF_FAULT_prev_off_by_one
            t = (t + 1) % vocab;
#endif
            bool valid = t >= 0 && t < vocab;
            for (int k = lane; k < rank; k += 32) {
                const u8* b = embed + 2 * ((size_t)(valid ? t : 0) * rank + k);
                e[k] = valid ? tf_bf16_to_f32((u16)b[0] | ((u16)b[1] << 8)) : __int_as_float(0x7fc00000);
            }
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        float* y = logits + (size_t)r * vocab;
        for (int v = warp; v < vocab; v += warps) {
            const u8* hv = head + 2 * (size_t)v * rank;
            float acc = 0.0f;
            for (int k = lane; k < rank; k += 32) acc = fmaf(tf_bf16_to_f32((u16)hv[2 * k] | ((u16)hv[2 * k + 1] << 8)), e[k], acc);
            acc = tf_warp_sum(acc);
            if (lane == 0) y[v] += acc;
        }
        __syncthreads();
    }
}
