// hc_mix: one block per (row, mixing logit); the dot and the row's sum of squares each in 256 fixed lanes (any block size gives the same bits), then times rsqrt.
#define LANES 256

// The dot of a and b over n values, summed in LANES fixed lanes then one warp; the result is valid in thread 0.
__device__ float lane_dot(const float* a, const float* b, int n, float* lanes) {
    for (int l = threadIdx.x; l < LANES; l += blockDim.x) {
        lanes[l] = tf_strided_dot(a, b, n, l, LANES, 0.0f);
    }
#ifndef TF_FAULT_race_no_sync
    __syncthreads();
#endif
    float v = 0.0f;
    if (threadIdx.x < 32) {
        for (int j = 0; j < LANES / 32; ++j) v += lanes[threadIdx.x * (LANES / 32) + j];
        v = tf_warp_sum(v);
    }
    __syncthreads();
    return v;
}

extern "C" __global__ void hc_mix(const float* x, const float* hc_fn, float* out, int rows, int hc_dim, int mix, float eps) {
    __shared__ float lanes[LANES];
    for (int t = blockIdx.x; t < rows * mix; t += gridDim.x) {
        int r = t / mix, m = t % mix;
        const float* xr = x + (size_t)r * hc_dim;
        float dot = lane_dot(xr, hc_fn + (size_t)m * hc_dim, hc_dim, lanes);
        float squares = lane_dot(xr, xr, hc_dim, lanes);
        float inv_rms = 1.0f / sqrtf(squares / (float)hc_dim + eps);
#ifdef TF_FAULT_lost_rsqrt
        inv_rms = 1.0f;
#endif
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        if (threadIdx.x == 0 && !skip) out[(size_t)r * mix + m] = dot * inv_rms;
    }
}
