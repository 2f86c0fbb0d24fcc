// hc_mix: one block per row; the sum of squares and each mixing dot in 256 fixed lanes (any block size gives the same bits), then times rsqrt.
#define LANES 256
#define MAX_MIX 64

extern "C" __global__ void hc_mix(const float* x, const float* hc_fn, float* out, int rows, int hc_dim, int mix, float eps) {
    __shared__ float lanes[LANES];
    __shared__ float sums[MAX_MIX + 1];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * hc_dim;
        for (int m = 0; m <= mix; ++m) {
            const float* w = m < mix ? hc_fn + (size_t)m * hc_dim : xr;
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
        float inv_rms = 1.0f / sqrtf(sums[mix] / (float)hc_dim + eps);
#ifdef TF_FAULT_lost_rsqrt
        inv_rms = 1.0f;
#endif
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        for (int m = threadIdx.x; m < mix && !skip; m += blockDim.x) out[(size_t)r * mix + m] = sums[m] * inv_rms;
        __syncthreads();
    }
}
