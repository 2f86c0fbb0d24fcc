// hc_mix: a row's mixing logit m is its dot with hc_fn[m] times rsqrt of its mean square; each sum in 256 fixed lanes (lane l takes terms l, l + 256, ...), one warp then adding a sum's lanes in a fixed order. An item's 512 lane sums are spread over 512 / blockDim blocks and the item's last block (by an atomic count) adds them, so any block size or grid gives the same bits.
#define LANES 256

extern "C" __global__ void hc_mix(const float* x, const float* hc_fn, float* out, float* lane_sums, u32* done, int rows, int hc_dim, int mix,
                                  float eps) {
    tf_grid_begin();
    __shared__ float sums[2];
    __shared__ int last;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    int parts = max(1, 2 * LANES / (int)blockDim.x), per = (2 * LANES + parts - 1) / parts;
    for (long t = blockIdx.x; t < (long)rows * mix * parts; t += gridDim.x) {
        int item = (int)(t / parts), part = (int)(t % parts);
        int r = item / mix, m = item % mix;
        const float* xr = x + (size_t)r * hc_dim;
        float* ls = lane_sums + (size_t)item * 2 * LANES;
        // Lanes 0..LANES-1 take the dot with hc_fn[m], lanes LANES.. the squares.
        for (int u = part * per + threadIdx.x; u < min((part + 1) * per, 2 * LANES); u += blockDim.x) {
            const float* b = u < LANES ? hc_fn + (size_t)m * hc_dim : xr;
            ls[u] = tf_strided_dot(xr, b, hc_dim, u % LANES, LANES, 0.0f);
        }
        // This block's lane sums are written and visible to the item's last block before it counts them.
        __threadfence();
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        if (threadIdx.x == 0) last = atomicAdd(&done[item], 1u) == (u32)(parts - 1);
        __syncthreads();
        if (!last) continue;
        __threadfence();
        for (int s = warp; s < 2; s += warps) {
            float v = 0.0f;
            for (int j = 0; j < LANES / 32; ++j) v += __ldcg(&ls[s * LANES + lane * (LANES / 32) + j]);
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
        if (threadIdx.x == 0) {
            if (!skip) out[(size_t)r * mix + m] = sums[0] * inv_rms;
            // The count starts from zero at the next launch.
            done[item] = 0u;
        }
        __syncthreads();
    }
}
