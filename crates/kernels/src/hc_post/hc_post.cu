// hc_post: one block per (row, slice of SLICE outputs); the row's comb and post weights broadcast through shared memory, then per value an FMA chain over the hc streams and the block output.
#define MAX_HC 16
#define SLICE 256

extern "C" __global__ void hc_post(const float* f, const float* x, const float* post, const float* comb, float* out, int rows, int hc,
                                   int dim) {
    tf_grid_begin();
    __shared__ float c[MAX_HC * MAX_HC];
    __shared__ float p[MAX_HC];
    int slices = (hc * dim + SLICE - 1) / SLICE;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * SLICE, hi = min(lo + SLICE, hc * dim);
        for (int i = threadIdx.x; i < hc * hc; i += blockDim.x) {
            int s = i / hc, j = i % hc;
            float v = comb[(size_t)r * hc * hc + s * hc + j];
#ifdef TF_FAULT_comb_not_transposed
            v = comb[(size_t)r * hc * hc + j * hc + s];
#endif
            c[i] = v;
        }
        for (int j = threadIdx.x; j < hc; j += blockDim.x) p[j] = post[(size_t)r * hc + j];
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        for (int i = lo + threadIdx.x; i < hi && !skip; i += blockDim.x) {
            int j = i / dim, d = i % dim;
            float acc = 0.0f;
            for (int s = 0; s < hc; ++s) acc = fmaf(c[s * hc + j], x[((size_t)r * hc + s) * dim + d], acc);
            acc = fmaf(p[j], f[(size_t)r * dim + d], acc);
            out[(size_t)r * hc * dim + i] = acc;
        }
        __syncthreads();
    }
}
