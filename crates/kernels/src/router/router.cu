// router: one block per row; sqrt-softplus scores in shared memory, then k rounds of a block argmax (higher value, then lower id): the CPU's order and ties.
// A NaN score ranks as -inf and a chosen expert is marked NaN, which never wins: every round picks an expert inside 0..experts not picked before.
#define MAX_EXPERTS 1024
#define MAX_TOPK 32
#define MAX_WARPS 32

// Whether (va, ia) comes before (vb, ib): higher value first, lower id on ties; a total order, so any reduction tree agrees.
__device__ __forceinline__ bool tf_before(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

extern "C" __global__ void router(const float* logits, const float* bias, i32* idx, float* weights, int rows, int experts, int k,
                                  float scale) {
    tf_grid_begin();
    __shared__ float scores[MAX_EXPERTS];
    __shared__ float vals[MAX_EXPERTS];
    __shared__ float warp_val[MAX_WARPS];
    __shared__ int warp_idx[MAX_WARPS];
    __shared__ int sel[MAX_TOPK];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int e = threadIdx.x; e < experts; e += blockDim.x) {
            float s = sqrtf(tf_softplus(logits[(size_t)r * experts + e]));
            scores[e] = s;
            vals[e] = s + bias[e];
#ifdef TF_FAULT_skip_bias
            vals[e] = s;
#endif
            if (vals[e] != vals[e]) vals[e] = -__int_as_float(0x7f800000);
        }
        __syncthreads();
        for (int j = 0; j < k; ++j) {
            float bv = -__int_as_float(0x7f800000);
            int bi = 0x7fffffff;
            for (int e = threadIdx.x; e < experts; e += blockDim.x)
                if (tf_before(vals[e], e, bv, bi)) { bv = vals[e]; bi = e; }
            for (int o = 16; o > 0; o >>= 1) {
                float ov = __shfl_xor_sync(0xffffffffu, bv, o);
                int oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (tf_before(ov, oi, bv, bi)) { bv = ov; bi = oi; }
            }
            if (lane == 0) {
                warp_val[warp] = bv;
                warp_idx[warp] = bi;
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                float v = warp_val[0];
                int i = warp_idx[0];
                for (int w = 1; w < warps; ++w)
                    if (tf_before(warp_val[w], warp_idx[w], v, i)) { v = warp_val[w]; i = warp_idx[w]; }
                i = min(max(i, 0), experts - 1);
                sel[j] = i;
                vals[i] = __int_as_float(0x7fc00000);
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
        }
        if (threadIdx.x == 0) {
            int used = k;
#ifdef TF_FAULT_drop_last_in_sum
            used = k - 1;
#endif
            float sum = 0.0f;
            for (int j = 0; j < used; ++j) sum += scores[sel[j]];
            for (int j = 0; j < k; ++j) {
                idx[(size_t)r * k + j] = sel[j];
                weights[(size_t)r * k + j] = scores[sel[j]] / sum * scale;
            }
        }
        __syncthreads();
    }
}
