// swiglu_quant: swiglu's values (swiglu.cu) a block per (row, slice of 256), each block then act_quant'ing the slice's 128-blocks from the values it wrote, a warp a block, as fp8_gemm's quantiser does.
#define QSLICE 256

extern "C" __global__ void swiglu_quant(const float* gate, const float* up, const float* route_weight, float* h, u16* q, float* q_scale,
                                        int rows, int inter, float limit) {
    tf_grid_begin();
    int slices = (inter + QSLICE - 1) / QSLICE, nblk = (inter + 127) / 128, kp = (inter + 7) / 8 * 8;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (long t = blockIdx.x; t < (long)rows * slices; t += gridDim.x) {
        int r = (int)(t / slices), lo = (int)(t % slices) * QSLICE, hi = min(lo + QSLICE, inter);
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        float rw = route_weight[r];
        float* hr = h + (size_t)r * inter;
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) hr[i] = tf_swiglu(gate[(size_t)r * inter + i], up[(size_t)r * inter + i], rw, limit, limit);
        // The slice's values are written before any warp reads them back.
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int b = lo / 128 + warp; b * 128 < hi; b += warps) {
            float* sb = q_scale + (size_t)r * nblk + b;
            tf_fp8_quant_block(hr, q + (size_t)r * kp, sb, b * 128, min(b * 128 + 128, inter), lane);
#ifdef TF_FAULT_lost_act_scale
            if (lane == 0) *sb = 1.0f;
#endif
        }
        __syncthreads();
    }
}
