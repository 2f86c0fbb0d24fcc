// hc_mix: one block per (row, mixing logit); the dot and the row's sum of squares side by side, each in 256 fixed lanes then one warp (any block size gives the same bits), then times rsqrt.
#define LANES 256
// The most hc_fn values of a lane held in registers from before the grid wait.
#define HELD 64

// The kernel's body after tf_grid_open, its first step the grid wait; HOLD: a thread a lane takes the block's first hc_fn lane into registers before it (hc_fn is never written).
template <bool HOLD>
__device__ __forceinline__ void tf_hc_mix(const float* x, const float* hc_fn, float* out, int rows, int hc_dim, int mix, float eps) {
    __shared__ float lanes[2 * LANES];
    __shared__ float sums[2];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    bool held = HOLD && blockDim.x == 2 * LANES && hc_dim <= HELD * LANES && (int)blockIdx.x < rows * mix;
    float hv[HELD];
    if (held && threadIdx.x < LANES) {
        const float* b = hc_fn + (size_t)(blockIdx.x % mix) * hc_dim;
#pragma unroll
        for (int j = 0; j < HELD; ++j) {
            int i = threadIdx.x + j * LANES;
            hv[j] = i < hc_dim ? b[i] : 0.0f;
        }
    }
    tf_grid_wait();
    for (int t = blockIdx.x; t < rows * mix; t += gridDim.x) {
        int r = t / mix, m = t % mix;
        const float* xr = x + (size_t)r * hc_dim;
        // Lanes 0..LANES-1 take the dot with hc_fn[m], lanes LANES.. the squares.
        for (int u = threadIdx.x; u < 2 * LANES; u += blockDim.x) {
            const float* b = u < LANES ? hc_fn + (size_t)m * hc_dim : xr;
            lanes[u] = held && t == (int)blockIdx.x && u < LANES ? tf_held_dot<HELD>(xr, hv, hc_dim, u, LANES) : tf_strided_dot(xr, b, hc_dim, u % LANES, LANES, 0.0f);
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int s = warp; s < 2; s += warps) {
            float v = 0.0f;
            for (int j = 0; j < LANES / 32; ++j) v += lanes[s * LANES + lane * (LANES / 32) + j];
            v = tf_warp_sum(v);
            if (lane == 0) sums[s] = v;
        }
        __syncthreads();
        float inv_rms = 1.0f / sqrtf(sums[1] / (float)hc_dim + eps);
#ifdef TF_FAULT_lost_rsqrt
        inv_rms = 1.0f;
#endif
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        if (threadIdx.x == 0 && !skip) out[(size_t)r * mix + m] = sums[0] * inv_rms;
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(512) hc_mix(const float* x, const float* hc_fn, float* out, int rows, int hc_dim, int mix, float eps) {
    tf_grid_open();
    tf_hc_mix<false>(x, hc_fn, out, rows, hc_dim, mix, eps);
}

// Decode rows: the same bits, each block's first hc_fn lane held from before the grid wait.
extern "C" __global__ void __launch_bounds__(512, 1) hc_mix_rows(const float* x, const float* hc_fn, float* out, int rows, int hc_dim, int mix, float eps) {
    tf_grid_open();
    tf_hc_mix<true>(x, hc_fn, out, rows, hc_dim, mix, eps);
}
