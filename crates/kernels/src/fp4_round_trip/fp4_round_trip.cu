// fp4_round_trip: one block per row; the row staged in shared memory (a barrier before the next row reuses it), then each warp a contiguous run of 32-value blocks: exact amax by shuffles, the FP4 round trip.
#define MAX_ROW 8192
#define FP4_BLOCK 32

extern "C" __global__ void fp4_round_trip(const float* x, float* y, int rows, int row_len) {
    tf_grid_begin();
    __shared__ float xs[MAX_ROW];
    int block = FP4_BLOCK;
#ifdef TF_FAULT_block_plus_one
    block += 1;
#endif
    int used = row_len;
#ifdef TF_FAULT_drop_last_element
    used = row_len - 1;
#endif
    int nblk = (used + block - 1) / block;
    const float floor = 6.0f * 1.17549435e-38f;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * row_len;
        float* yr = y + (size_t)r * row_len;
        for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
            xs[i] = xr[i];
            if (i >= used) yr[i] = xr[i];
        }
        __syncthreads();
        int per = (nblk + warps - 1) / warps;
        for (int b = warp * per; b < min(nblk, (warp + 1) * per); ++b) {
            int lo = b * block, hi = min(lo + block, used);
            float m = 0.0f;
            for (int i = lo + lane; i < hi; i += 32) m = fmaxf(m, fabsf(xs[i]));
            for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            float s = tf_pow2_scale(m, floor, 6.0f);
            for (int i = lo + lane; i < hi; i += 32) yr[i] = tf_round_trip_e2m1(xs[i], s);
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
    }
}
