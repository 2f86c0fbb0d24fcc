// act_quant: one block per row; the row staged in shared memory (a barrier before the next row reuses it), then one warp per quant block: exact amax by shuffles, the FP8 round trip.
#define MAX_ROW 8192

extern "C" __global__ void act_quant(const float* x, float* y, int rows, int row_len, int n, int block) {
    tf_grid_begin();
    __shared__ float xs[MAX_ROW];
#ifdef TF_FAULT_block_plus_one
    block += 1;
#endif
    int end = n;
#ifdef TF_FAULT_skip_last_block
    end = n > 0 ? (n - 1) / block * block : 0;
#endif
    int nblk = (end + block - 1) / block;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * row_len;
        float* yr = y + (size_t)r * row_len;
        for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
            xs[i] = xr[i];
            if (i >= end) yr[i] = xr[i];
        }
        __syncthreads();
        for (int b = warp; b < nblk; b += warps) {
            int lo = b * block, hi = min(lo + block, end);
            float m = 0.0f;
            for (int i = lo + lane; i < hi; i += 32) m = fmaxf(m, fabsf(xs[i]));
            for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            float s = tf_pow2_scale(m, 1e-4f, 448.0f);
            for (int i = lo + lane; i < hi; i += 32) yr[i] = tf_round_trip_e4m3(xs[i], s);
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
    }
}
