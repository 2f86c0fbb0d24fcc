// rms_norm: one block per row (rows past the grid loop); the sum of squares in 256 fixed lanes, so any block size gives the same bits.
#define LANES 256

extern "C" __global__ void rms_norm(const float* x, const float* weight, float* y, int rows, int dim, float eps) {
    __shared__ float lanes[LANES];
    __shared__ float scale;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        const float* xr = x + (size_t)r * dim;
        int used = dim;
#ifdef TF_FAULT_drop_last_element
        used = dim - 1;
#endif
        for (int l = threadIdx.x; l < LANES; l += blockDim.x) {
            float acc = 0.0f;
            for (int i = l; i < used; i += LANES) acc = fmaf(xr[i], xr[i], acc);
            lanes[l] = acc;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (threadIdx.x < 32) {
            float v = 0.0f;
            for (int j = 0; j < LANES / 32; ++j) v += lanes[threadIdx.x * (LANES / 32) + j];
            v = tf_warp_sum(v);
            if (threadIdx.x == 0) scale = 1.0f / sqrtf(v / (float)dim + eps);
        }
        __syncthreads();
        float s = scale;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) y[(size_t)r * dim + i] = xr[i] * s * weight[i];
        __syncthreads();
    }
}
