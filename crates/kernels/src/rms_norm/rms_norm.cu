// rms_norm: one block per (row, slice of SLICE values); every block sums the row's squares in the same 256 fixed lanes (any block size or grid gives the same bits), then scales its slice.
#define LANES 256
#define SLICE 256

// Values lo..hi of row xr's norm into yr, by the whole block (lanes and scale its shared scratch); the caller's barrier follows.
__device__ __forceinline__ void tf_rms_norm_slice(const float* xr, const float* weight, float* yr, int dim, float eps, int lo, int hi,
                                                  float* lanes, float* scale) {
    int used = dim;
#ifdef TF_FAULT_drop_last_element
    used = dim - 1;
#endif
    for (int l = threadIdx.x; l < LANES; l += blockDim.x) {
        lanes[l] = tf_strided_dot(xr, xr, used, l, LANES, 0.0f);
    }
#ifndef TF_FAULT_race_no_sync
    __syncthreads();
#endif
    if (threadIdx.x < 32) {
        float v = 0.0f;
        for (int j = 0; j < LANES / 32; ++j) v += lanes[threadIdx.x * (LANES / 32) + j];
        v = tf_warp_sum(v);
        if (threadIdx.x == 0) *scale = 1.0f / sqrtf(v / (float)dim + eps);
    }
    __syncthreads();
    float s = *scale;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) yr[i] = xr[i] * s * weight[i];
}

extern "C" __global__ void rms_norm(const float* x, const float* weight, float* y, int rows, int dim, float eps) {
    tf_grid_begin();
    __shared__ float lanes[LANES];
    __shared__ float scale;
    int slices = (dim + SLICE - 1) / SLICE;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * SLICE, hi = min(lo + SLICE, dim);
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        tf_rms_norm_slice(x + (size_t)r * dim, weight, y + (size_t)r * dim, dim, eps, lo, hi, lanes, &scale);
        __syncthreads();
    }
}
