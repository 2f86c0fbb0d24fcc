// fp4_round_trip: one block per row; each 32-value block's amax by atomicMax on the bits (exact, order-free) in shared memory, then the FP4 round trip.
#define MAX_QBLOCKS 1024
#define FP4_BLOCK 32

extern "C" __global__ void fp4_round_trip(const float* x, float* y, int rows, int row_len) {
    __shared__ u32 amax[MAX_QBLOCKS];
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
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * row_len;
        for (int b = threadIdx.x; b < nblk; b += blockDim.x) amax[b] = 0u;
        __syncthreads();
        for (int i = threadIdx.x; i < used; i += blockDim.x) atomicMax(&amax[i / block], __float_as_uint(fabsf(xr[i])));
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
            float v = xr[i];
            if (i < used) v = tf_round_trip_e2m1(v, tf_pow2_scale(__uint_as_float(amax[i / block]), floor, 6.0f));
            y[(size_t)r * row_len + i] = v;
        }
        __syncthreads();
    }
}
