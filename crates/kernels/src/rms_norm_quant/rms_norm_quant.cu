// rms_norm_quant: rms_norm's blocks (rms_norm.cu), each then act_quant'ing the 128-blocks of its slice (SLICE a multiple of 128) from the values it wrote, a warp a block, as fp8_gemm's quantiser does.
extern "C" __global__ void rms_norm_quant(const float* x, const float* weight, float* y, u16* q, float* q_scale, int rows, int dim,
                                          float eps) {
    tf_grid_begin();
    __shared__ float lanes[LANES];
    __shared__ float scale;
    int slices = (dim + SLICE - 1) / SLICE, nblk = (dim + 127) / 128, kp = (dim + 7) / 8 * 8;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * SLICE, hi = min(lo + SLICE, dim);
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        float* yr = y + (size_t)r * dim;
        tf_rms_norm_slice(x + (size_t)r * dim, weight, yr, dim, eps, lo, hi, lanes, &scale);
        // The slice's values are written before any warp reads them back.
        __syncthreads();
        for (int b = lo / 128 + warp; b * 128 < hi; b += warps) {
            u16* qr = q + (size_t)r * kp;
            float* sb = q_scale + (size_t)r * nblk + b;
            tf_fp8_quant_block(yr, qr, sb, b * 128, min(b * 128 + 128, dim), lane);
#ifdef TF_FAULT_lost_act_scale
            if (lane == 0) *sb = 1.0f;
#endif
        }
        __syncthreads();
    }
}
