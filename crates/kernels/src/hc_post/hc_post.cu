// hc_post: one block per row (rows past the grid loop), the row's comb and post weights in shared memory; each element one FMA chain, streams first, block output last.
#define MAX_HC 16

extern "C" __global__ void hc_post(const float* f, const float* x, const float* post, const float* comb, float* y, int rows,
                                   int hc, int dim) {
    __shared__ float c[MAX_HC * MAX_HC];
    __shared__ float p[MAX_HC];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        for (int i = threadIdx.x; i < hc * hc; i += blockDim.x) c[i] = comb[(size_t)r * hc * hc + i];
        if (threadIdx.x < hc) p[threadIdx.x] = post[(size_t)r * hc + threadIdx.x];
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        const float* xr = x + (size_t)r * hc * dim;
        for (int i = threadIdx.x; i < hc * dim; i += blockDim.x) {
            int j = i / dim, d = i % dim;
            float acc = 0.0f;
            for (int s = 0; s < hc; ++s) {
#ifdef TF_FAULT_comb_not_transposed
                float w = c[j * hc + s];
#else
                float w = c[s * hc + j];
#endif
                acc = fmaf(w, xr[(size_t)s * dim + d], acc);
            }
            y[(size_t)r * hc * dim + i] = fmaf(p[j], f[(size_t)r * dim + d], acc);
        }
        __syncthreads();
    }
}
