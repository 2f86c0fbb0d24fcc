// hc_pre: one block per (row, slice of SLICE values); the row's pre weights broadcast through shared memory, then per value an FMA chain over the hc streams in order.
#define MAX_HC 16
#define SLICE 256

// The collapse after the grid wait, gate(r, s) giving row r's weight of stream s (hc_pre and hc_pre_mix differ only there).
template <typename Gate>
__device__ __forceinline__ void tf_hc_collapse(const float* x, float* out, int rows, int hc, int dim, Gate gate) {
    __shared__ float p[MAX_HC];
    int used = hc;
#ifdef TF_FAULT_drop_last_stream
    used = hc - 1;
#endif
    int slices = (dim + SLICE - 1) / SLICE;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * SLICE, hi = min(lo + SLICE, dim);
        for (int s = threadIdx.x; s < hc; s += blockDim.x) p[s] = gate(r, s);
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int d = lo + threadIdx.x; d < hi; d += blockDim.x) {
            float acc = 0.0f;
            for (int s = 0; s < used; ++s) acc = fmaf(p[s], x[((size_t)r * hc + s) * dim + d], acc);
            out[(size_t)r * dim + d] = acc;
        }
        __syncthreads();
    }
}

extern "C" __global__ void hc_pre(const float* x, const float* pre, float* out, int rows, int hc, int dim) {
    tf_grid_begin();
    tf_hc_collapse(x, out, rows, hc, dim, [=](int r, int s) { return pre[(size_t)r * hc + s]; });
}
