// hc_head: one block per row (rows past the grid loop); hc_mix's half-warp dots for the gates, the gates in shared memory, then hc_pre's FMA chain per element.
#define MAX_HC 16

// e^x exactly as the CPU's math::exp: a fixed FMA polynomial after a ties-even reduction by ln 2.
__device__ __forceinline__ float hc_head_exp(float x) {
    if (x != x) return x;
    if (x > 88.72284f) return __int_as_float(0x7f800000);
    if (x < -103.97208f) return 0.0f;
    float n = rintf(x * 1.44269504088896340736f);
    float r = fmaf(n, -1.4286068e-6f, fmaf(n, -0.69314575f, x));
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int ni = (int)n;
    int a = min(max(ni, -126), 127);
    int b = ni - a;
    float pa = p * __int_as_float((a + 127) << 23);
    return b == 0 ? pa : pa * __int_as_float(min(max(b + 127, 1), 254) << 23);
}

// a . b in 16 lanes (lane j takes elements j, j + 16, ...), then the fixed tree (j, j+8), (j, j+4), (j, j+2), (0, 1); lane 0 of the half-warp holds it.
__device__ __forceinline__ float hc_head_dot(const float* a, const float* b, int n, int lane) {
    unsigned half = 0xffffu << (threadIdx.x & 16);
    float acc = 0.0f;
    for (int i = lane; i < n; i += 16) acc = fmaf(a[i], b[i], acc);
    for (int o = 8; o > 0; o >>= 1) acc += __shfl_down_sync(half, acc, o, 16);
    return acc;
}

extern "C" __global__ void hc_head(const float* x, const float* hc_fn, const float* base, float* y, int rows, int hc, int dim,
                                   float scale, float norm_eps, float hc_eps) {
    __shared__ float dots[MAX_HC + 1];
    __shared__ float pre[MAX_HC];
    int lane = threadIdx.x & 15, group = threadIdx.x >> 4, groups = blockDim.x >> 4;
    int hc_dim = hc * dim;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        const float* xr = x + (size_t)r * hc_dim;
        // Item `hc` is the sum of squares, items below it the gate rows.
        for (int m = group; m <= hc; m += groups) {
            float d = hc_head_dot(xr, m == hc ? xr : hc_fn + (size_t)m * hc_dim, hc_dim, lane);
            if (lane == 0) dots[m] = d;
        }
        __syncthreads();
        if (threadIdx.x < hc) {
            float inv_rms = 1.0f / sqrtf(dots[hc] / (float)hc_dim + norm_eps);
#ifdef TF_FAULT_lost_rsqrt
            inv_rms = 1.0f;
#endif
            float z = fmaf(dots[threadIdx.x] * inv_rms, scale, base[threadIdx.x]);
            pre[threadIdx.x] = 1.0f / (1.0f + hc_head_exp(-z)) + hc_eps;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int d = threadIdx.x; d < dim; d += blockDim.x) {
            float acc = 0.0f;
            for (int s = 0; s < hc; ++s) acc = fmaf(pre[s], xr[(size_t)s * dim + d], acc);
            y[(size_t)r * dim + d] = acc;
        }
        __syncthreads();
    }
}
