// hc_pre_mix: hc_pre with the row's pre gates made in shared memory from its mix, as hc_split_sinkhorn makes them.
#define MAX_HC 16
#define SLICE 256

extern "C" __global__ void hc_pre_mix(const float* x, const float* mix, const float* scale, const float* base, float* out, int rows, int hc,
                                      int dim, float eps) {
    tf_grid_begin();
    __shared__ float p[MAX_HC];
    int used = hc, width = (2 + hc) * hc;
#ifdef TF_FAULT_drop_last_stream
    used = hc - 1;
#endif
    float s0 = scale[0];
#ifdef TF_FAULT_lost_pre_scale
    s0 = 1.0f;
#endif
    int slices = (dim + SLICE - 1) / SLICE;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * SLICE, hi = min(lo + SLICE, dim);
        for (int s = threadIdx.x; s < hc; s += blockDim.x) p[s] = tf_sigmoid(fmaf(mix[(size_t)r * width + s], s0, base[s])) + eps;
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
