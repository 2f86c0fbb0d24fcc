// hc_head: one block per row; rsqrt and the hc mixing dots in 256 fixed lanes, pre = sigmoid(d * rsqrt * scale + base) + eps, then an FMA chain over the streams.
#define LANES 256
#define MAX_HC 16

extern "C" __global__ void hc_head(const float* x, const float* hc_fn, const float* base, float* out, int rows, int hc, int dim,
                                   float scale, float norm_eps, float hc_eps) {
    __shared__ float lanes[LANES];
    __shared__ float sums[MAX_HC + 1];
    __shared__ float pre[MAX_HC];
    int hc_dim = hc * dim;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * hc_dim;
        for (int m = 0; m <= hc; ++m) {
            const float* w = m < hc ? hc_fn + (size_t)m * hc_dim : xr;
            for (int l = threadIdx.x; l < LANES; l += blockDim.x) {
                float acc = 0.0f;
                for (int i = l; i < hc_dim; i += LANES) acc = fmaf(xr[i], w[i], acc);
                lanes[l] = acc;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            if (threadIdx.x < 32) {
                float v = 0.0f;
                for (int j = 0; j < LANES / 32; ++j) v += lanes[threadIdx.x * (LANES / 32) + j];
                v = tf_warp_sum(v);
                if (threadIdx.x == 0) sums[m] = v;
            }
            __syncthreads();
        }
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
        for (int d = threadIdx.x; d < dim && !skip; d += blockDim.x) {
            float acc = 0.0f;
            for (int m = 0; m < hc; ++m) acc = fmaf(pre[m], xr[(size_t)m * dim + d], acc);
            out[(size_t)r * dim + d] = acc;
        }
        __syncthreads();
    }
}
