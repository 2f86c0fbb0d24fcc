// head_rms_norm: one block per head (heads past the grid loop); the sum of squares in 256 fixed lanes, so any block size gives the same bits.
#define LANES 256

extern "C" __global__ void head_rms_norm(const float* q, float* y, int num_heads, int head_dim, float eps) {
    tf_grid_begin();
    __shared__ float lanes[LANES];
    __shared__ float scale;
    for (int h = blockIdx.x; h < num_heads; h += gridDim.x) {
#ifdef TF_FAULT_skip_last_head
        if (h == num_heads - 1) continue;
#endif
        const float* qh = q + (size_t)h * head_dim;
        int used = head_dim;
#ifdef TF_FAULT_drop_last_element
        used = head_dim - 1;
#endif
        for (int l = threadIdx.x; l < LANES; l += blockDim.x) {
            float acc = 0.0f;
            for (int i = l; i < used; i += LANES) acc = fmaf(qh[i], qh[i], acc);
            lanes[l] = acc;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (threadIdx.x < 32) {
            float v = 0.0f;
            for (int j = 0; j < LANES / 32; ++j) v += lanes[threadIdx.x * (LANES / 32) + j];
            v = tf_warp_sum(v);
            if (threadIdx.x == 0) scale = 1.0f / sqrtf(v / (float)head_dim + eps);
        }
        __syncthreads();
        float s = scale;
        for (int i = threadIdx.x; i < head_dim; i += blockDim.x) y[(size_t)h * head_dim + i] = qh[i] * s;
        __syncthreads();
    }
}
