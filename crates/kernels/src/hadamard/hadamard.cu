// hadamard: one block per segment (segments past the grid loop), butterflies in shared memory in a fixed stage order, then one scale.
#define MAX_N 4096

extern "C" __global__ void hadamard(const float* x, float* y, int segments, int n, float scale) {
    tf_grid_begin();
    __shared__ float s[MAX_N];
    for (int g = blockIdx.x; g < segments; g += gridDim.x) {
#ifdef TF_FAULT_skip_last_segment
        if (g == segments - 1) continue;
#endif
        const float* xs = x + (size_t)g * n;
        for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = xs[i];
        __syncthreads();
        for (int h = 1; h < n; h <<= 1) {
            for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
                int lo = (p / h) * 2 * h + (p % h);
                float a = s[lo], b = s[lo + h];
                s[lo] = a + b;
                s[lo + h] = a - b;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
        }
        float sc = scale;
#ifdef TF_FAULT_lost_scale
        sc = 1.0f;
#endif
        for (int i = threadIdx.x; i < n; i += blockDim.x) y[(size_t)g * n + i] = s[i] * sc;
        __syncthreads();
    }
}
