// nvfp4_round_trip: one block per row; each thread decides the e4m3 scales of its 16-value blocks into shared memory, then every thread rounds values in f64 (exact, as the CPU).
#define MAX_ROW 8192
#define NVFP4_BLOCK 16

// Round to nearest even on a float grid with `mant_bits` bits and subnormals below 2^min_exp, saturating at maxv.
__device__ __forceinline__ double nv_round_grid(double v, int mant_bits, int min_exp, double maxv) {
    if (v == 0.0) return 0.0;
    long long bits = __double_as_longlong(fabs(v));
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    e = e < min_exp ? min_exp : e;
    double step = __longlong_as_double((long long)(e - mant_bits + 1023) << 52);
    return fmin(fmax(rint(v / step) * step, -maxv), maxv);
}

extern "C" __global__ void nvfp4_round_trip(const float* x, float* y, int rows, int row_len) {
    tf_grid_begin();
    __shared__ double scale[MAX_ROW / NVFP4_BLOCK];
    int block = NVFP4_BLOCK;
#ifdef TF_FAULT_block_32
    block = 2 * NVFP4_BLOCK;
#endif
    int nblk = (row_len + block - 1) / block;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * row_len;
        float* yr = y + (size_t)r * row_len;
        for (int b = threadIdx.x; b < nblk; b += blockDim.x) {
            double amax = 0.0;
            for (int i = b * block; i < min(row_len, (b + 1) * block); ++i) amax = fmax(amax, fabs((double)xr[i]));
            scale[b] = nv_round_grid(amax / 6.0, 3, -6, 448.0);
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
            double s = scale[i / block];
            yr[i] = s == 0.0 ? 0.0f : (float)(nv_round_grid((double)xr[i] / s, 1, 0, 6.0) * s);
        }
        __syncthreads();
    }
}
