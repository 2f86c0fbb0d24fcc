// hc_pre: one block per row (rows past the grid loop), the row's stream weights in shared memory; each element one FMA chain over the streams in order.
#define MAX_HC 16

extern "C" __global__ void hc_pre(const float* x, const float* pre, float* y, int rows, int hc, int dim) {
    __shared__ float w[MAX_HC];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        if (threadIdx.x < hc) w[threadIdx.x] = pre[(size_t)r * hc + threadIdx.x];
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        int used = hc;
#ifdef TF_FAULT_drop_last_stream
        used = hc - 1;
#endif
        const float* xr = x + (size_t)r * hc * dim;
        for (int d = threadIdx.x; d < dim; d += blockDim.x) {
            float acc = 0.0f;
            for (int s = 0; s < used; ++s) acc = fmaf(w[s], xr[(size_t)s * dim + d], acc);
            y[(size_t)r * dim + d] = acc;
        }
        __syncthreads();
    }
}
