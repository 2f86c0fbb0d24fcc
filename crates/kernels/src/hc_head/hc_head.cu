// hc_head: one block per (row, slice of SLICE outputs); each block takes the rsqrt and hc mixing dots in 256 fixed lanes apiece (a thread per lane and dot), pre = sigmoid(d * rsqrt * scale + base) + eps, then an FMA chain over the streams.
#define LANES 256
#define MAX_HC 16
#define SLICE 512

extern "C" __global__ void hc_head(const float* x, const float* hc_fn, const float* base, float* out, int rows, int hc, int dim,
                                   float scale, float norm_eps, float hc_eps) {
    tf_grid_begin();
    __shared__ float lanes[(MAX_HC + 1) * LANES];
    __shared__ float sums[MAX_HC + 1];
    __shared__ float pre[MAX_HC];
    int hc_dim = hc * dim, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    int slices = (dim + SLICE - 1) / SLICE;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * SLICE, hi = min(lo + SLICE, dim);
        const float* xr = x + (size_t)r * hc_dim;
        for (int u = threadIdx.x; u < (hc + 1) * LANES; u += blockDim.x) {
            int m = u / LANES, l = u % LANES;
            const float* w = m < hc ? hc_fn + (size_t)m * hc_dim : xr;
            lanes[u] = tf_strided_dot(xr, w, hc_dim, l, LANES, 0.0f);
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int m = warp; m <= hc; m += warps) {
            int lane = threadIdx.x % 32;
            float v = 0.0f;
            for (int j = 0; j < LANES / 32; ++j) v += lanes[m * LANES + lane * (LANES / 32) + j];
            v = tf_warp_sum(v);
            if (lane == 0) sums[m] = v;
        }
        __syncthreads();
        if (threadIdx.x < hc) {
            float inv_rms = 1.0f / sqrtf(sums[hc] / (float)hc_dim + norm_eps);
#ifdef TF_FAULT_lost_rsqrt
            inv_rms = 1.0f;
#endif
            float z = fmaf(sums[threadIdx.x] * inv_rms, scale, base[threadIdx.x]);
            pre[threadIdx.x] = 1.0f / (1.0f + expf(-z)) + hc_eps;
        }
        __syncthreads();
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        for (int d = lo + threadIdx.x; d < hi && !skip; d += blockDim.x) {
            float acc = 0.0f;
            for (int m = 0; m < hc; ++m) acc = fmaf(pre[m], xr[(size_t)m * dim + d], acc);
            out[(size_t)r * dim + d] = acc;
        }
        __syncthreads();
    }
}
