// hc_mix: one block per row (rows past the grid loop); one half-warp per dot (each mix row, and the row with itself for the RMS) with the CPU's 16 lanes and halving tree, so any block size gives the same bits.
#define MAX_MIX 64

// a . b in 16 lanes (lane j takes elements j, j + 16, ...), then the fixed tree (j, j+8), (j, j+4), (j, j+2), (0, 1); lane 0 of the half-warp holds it.
__device__ __forceinline__ float hc_mix_dot(const float* a, const float* b, int n, int lane) {
    unsigned half = 0xffffu << (threadIdx.x & 16);
    float acc = 0.0f;
    for (int i = lane; i < n; i += 16) acc = fmaf(a[i], b[i], acc);
    for (int o = 8; o > 0; o >>= 1) acc += __shfl_down_sync(half, acc, o, 16);
    return acc;
}

extern "C" __global__ void hc_mix(const float* x, const float* hc_fn, float* out, int rows, int hc_dim, int mix, float eps) {
    __shared__ float dots[MAX_MIX + 1];
    int lane = threadIdx.x & 15, group = threadIdx.x >> 4, groups = blockDim.x >> 4;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        const float* xr = x + (size_t)r * hc_dim;
        // Item `mix` is the sum of squares, items below it the mix rows; the last groups take the extra items, so warp 0 (the writer) is free first.
        for (int m = groups - 1 - group; m <= mix; m += groups) {
            float d = hc_mix_dot(xr, m == mix ? xr : hc_fn + (size_t)m * hc_dim, hc_dim, lane);
            if (lane == 0) dots[m] = d;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        float inv_rms = 1.0f / sqrtf(dots[mix] / (float)hc_dim + eps);
#ifdef TF_FAULT_lost_rsqrt
        inv_rms = 1.0f;
#endif
        for (int m = threadIdx.x; m < mix; m += blockDim.x) out[(size_t)r * mix + m] = dots[m] * inv_rms;
        __syncthreads();
    }
}
