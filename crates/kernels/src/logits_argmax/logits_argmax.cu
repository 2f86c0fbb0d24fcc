// logits_argmax: each row's greedy pick (the lowest id of the largest non-NaN logit; the last id when all are NaN) as an f32 id: a block a part of a row, then a block a row over its parts' candidates (items past the grid loop), block sizes whole warps; candidates compare by one total order, so any split of a row gives the same id.

// Whether candidate (v, i) is the pick over (bv, bi), the two from disjoint ids; an id below 0 is no candidate.
__device__ __forceinline__ bool tf_argmax_better(float v, int i, float bv, int bi) {
    if (i < 0) return false;
    if (bi < 0) return true;
    bool vn = isnan(v), bn = isnan(bv);
    if (vn != bn) {
#ifdef TF_FAULT_nan_wins
        return vn;
#else
        return bn;
#endif
    }
    if (vn) return i > bi;
    if (v != bv) return v > bv;
#ifdef TF_FAULT_ties_to_last
    return i > bi;
#else
    return i < bi;
#endif
}

// A warp's best candidate into lane 0.
__device__ __forceinline__ void tf_argmax_warp(float& bv, int& bi) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        float v = __shfl_down_sync(0xffffffffu, bv, o);
        int i = __shfl_down_sync(0xffffffffu, bi, o);
        if (tf_argmax_better(v, i, bv, bi)) bv = v, bi = i;
    }
}

// This thread's best of ids lo..hi of row xr: 16-byte loads, four in flight, where the row is whole 16-byte pieces (lo a multiple of 4); else one value at a time.
__device__ __forceinline__ void tf_argmax_scan(const float* xr, int vocab, int lo, int hi, float& bv, int& bi) {
    if (vocab % 4 == 0 && (size_t)xr % 16 == 0) {
        const float4* x4 = (const float4*)xr;
        int c1 = hi / 4, step = blockDim.x;
        for (int c0 = lo / 4 + threadIdx.x; c0 < c1; c0 += 4 * step) {
            float4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (c0 + u * step < c1) v[u] = x4[c0 + u * step];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                int c = c0 + u * step;
                if (c >= c1) break;
                float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (tf_argmax_better(e[j], 4 * c + j, bv, bi)) bv = e[j], bi = 4 * c + j;
            }
        }
        return;
    }
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float v = xr[i];
        if (tf_argmax_better(v, i, bv, bi)) bv = v, bi = i;
    }
}

// The block's best of its threads' candidates, in thread 0; every thread passes through both barriers.
__device__ __forceinline__ void tf_argmax_block(float& bv, int& bi) {
    __shared__ float sv[32];
    __shared__ int si[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    tf_argmax_warp(bv, bi);
    if (lane == 0) sv[warp] = bv, si[warp] = bi;
#ifndef TF_FAULT_race_no_sync
    __syncthreads();
#endif
    if (warp == 0) {
        bv = lane < warps ? sv[lane] : 0.0f;
        bi = lane < warps ? si[lane] : -1;
        tf_argmax_warp(bv, bi);
    }
#ifndef TF_FAULT_race_no_sync
    __syncthreads();
#endif
}

// Pass 1: block b's best of part b % parts (ids span * part on) of row b / parts, into pv[b], pi[b].
extern "C" __global__ void logits_argmax_part(const float* x, float* pv, int* pi, int rows, int vocab, int parts, int span) {
    tf_grid_begin();
    for (int b = blockIdx.x; b < rows * parts; b += gridDim.x) {
        int r = b / parts, lo = (b % parts) * span;
        float bv = 0.0f;
        int bi = -1;
        tf_argmax_scan(x + (size_t)r * vocab, vocab, lo, min(vocab, lo + span), bv, bi);
        tf_argmax_block(bv, bi);
        if (threadIdx.x == 0) pv[b] = bv, pi[b] = bi;
    }
}

// Pass 2: each row's best of its parts' candidates, as an f32 id.
extern "C" __global__ void logits_argmax(const float* pv, const int* pi, float* out, int rows, int parts) {
    tf_grid_begin();
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float bv = 0.0f;
        int bi = -1;
        for (int p = threadIdx.x; p < parts; p += blockDim.x) {
            float v = pv[r * parts + p];
            int i = pi[r * parts + p];
            if (tf_argmax_better(v, i, bv, bi)) bv = v, bi = i;
        }
        tf_argmax_block(bv, bi);
        if (threadIdx.x == 0) out[r] = (float)bi;
    }
}
