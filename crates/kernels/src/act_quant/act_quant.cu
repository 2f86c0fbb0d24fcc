// act_quant: one block per row; each quant block's amax by atomicMax on the bits (exact, order-free) in shared memory, then the FP8 round trip.
#define MAX_QBLOCKS 1024

extern "C" __global__ void act_quant(const float* x, float* y, int rows, int row_len, int n, int block) {
    __shared__ u32 amax[MAX_QBLOCKS];
#ifdef TF_FAULT_block_plus_one
    block += 1;
#endif
    int end = n;
#ifdef TF_FAULT_skip_last_block
    end = n > 0 ? (n - 1) / block * block : 0;
#endif
    int nblk = (end + block - 1) / block;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + (size_t)r * row_len;
        for (int b = threadIdx.x; b < nblk; b += blockDim.x) amax[b] = 0u;
        __syncthreads();
        for (int i = threadIdx.x; i < end; i += blockDim.x) atomicMax(&amax[i / block], __float_as_uint(fabsf(xr[i])));
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
            float v = xr[i];
            if (i < end) v = tf_round_trip_e4m3(v, tf_pow2_scale(__uint_as_float(amax[i / block]), 1e-4f, 448.0f));
            y[(size_t)r * row_len + i] = v;
        }
        __syncthreads();
    }
}
