// hc_in: hc_mix's blocks, and the last of a row's (by a per-row count it resets) then the row's split (hc <= 4), its last warp making comb while the others make hc_pre and rms_norm_quant, each in its own kernel's order.
#define SMALL_HC 4
#define MAX_DIM 8192
// Values of a row a thread holds in registers at once.
#define PER 8

// Values lo + t + k nt (k < PER) of the hc streams of row xr and of the norm's weight, for thread t of nt.
__device__ __forceinline__ void tf_hc_in_load(const float* xr, const float* weight, int hc, int dim, int lo, int nt, float (*xv)[SMALL_HC], float* wv) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        int d = lo + threadIdx.x + k * nt;
        if (d >= dim) continue;
        wv[k] = weight[d];
#pragma unroll
        for (int s = 0; s < SMALL_HC; ++s)
            if (s < hc) xv[k][s] = xr[(size_t)s * dim + d];
    }
}

// The row's collapse by pre (into y and ys), its norm (into yn and ys) and act_quant, by the block's first nt threads, xv and wv loaded for lo = 0.
__device__ __forceinline__ void tf_hc_in_row(const float* xr, const float* weight, const float* p, float* yr, float* ynr, u16* qr, float* sr, float* ys,
                                             float* lanes, float* scale, int hc, int dim, float eps, int nt, bool skip, float (*xv)[SMALL_HC],
                                             float* wv) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, span = PER * nt;
    for (int lo = 0; lo < dim; lo += span) {
        if (lo > 0) tf_hc_in_load(xr, weight, hc, dim, lo, nt, xv, wv);
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            int d = lo + threadIdx.x + k * nt;
            if (d >= dim) continue;
            float acc = 0.0f;
#pragma unroll
            for (int s = 0; s < SMALL_HC; ++s)
                if (s < hc) acc = fmaf(p[s], xv[k][s], acc);
            ys[d] = acc;
            yr[d] = acc;
        }
    }
#ifndef TF_FAULT_race_no_sync
    tf_bar(nt);
#endif
    float inv = tf_rms_inv(ys, dim, eps, lanes, scale, nt);
    for (int lo = 0; lo < dim; lo += span) {
        if (lo > 0 || dim > span) tf_hc_in_load(xr, weight, 0, dim, lo, nt, xv, wv);
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            int d = lo + threadIdx.x + k * nt;
            if (d >= dim) continue;
            float o = ys[d] * inv * wv[k];
            ys[d] = o;
            ynr[d] = o;
        }
    }
    // The normed row is written before any warp reads it back.
    tf_bar(nt);
    for (int b = warp; b * 128 < dim && !skip; b += nt / 32) {
        tf_fp8_quant_block(ys, qr, sr + b, b * 128, min(b * 128 + 128, dim), lane);
#ifdef TF_FAULT_lost_act_scale
        if (lane == 0) sr[b] = 1.0f;
#endif
    }
}

extern "C" __global__ void hc_in(const float* x, const float* hc_fn, const float* scale, const float* base, const float* weight, float* mix,
                                 float* pre, float* post, float* comb, float* y, float* yn, u16* q, float* q_scale, u32* counts, int rows,
                                 int hc, int dim, int iters, float eps, float hc_eps) {
    tf_grid_begin();
    __shared__ float lanes[2 * LANES];
    __shared__ float sums[2];
    __shared__ float row_mix[(2 + SMALL_HC) * SMALL_HC];
    __shared__ float p[SMALL_HC];
    __shared__ float ys[MAX_DIM];
    __shared__ bool last;
    int width = (2 + hc) * hc, hc_dim = hc * dim, nblk = (dim + 127) / 128, kp = (dim + 7) / 8 * 8;
    int warp = threadIdx.x / 32, nt = blockDim.x - 32;
    for (int t = blockIdx.x; t < rows * width; t += gridDim.x) {
        int r = t / width, m = t % width;
        const float* xr = x + (size_t)r * hc_dim;
        float v = tf_hc_mix_value(xr, hc_fn + (size_t)m * hc_dim, hc_dim, eps, lanes, sums);
        if (threadIdx.x == 0) {
            mix[(size_t)r * width + m] = v;
            // The value is visible device-wide before the count says it is there.
            __threadfence();
            last = atomicAdd(&counts[r], 1u) == (u32)width - 1;
        }
        __syncthreads();
        if (!last) continue;
        __threadfence();
        float xv[PER][SMALL_HC], wv[PER];
        // The first values' loads fly while the logits are split.
        if (threadIdx.x < nt) tf_hc_in_load(xr, weight, hc, dim, 0, nt, xv, wv);
        // The row's other logits come from L2: this SM's L1 never held them.
        for (int i = threadIdx.x; i < width; i += blockDim.x) row_mix[i] = __ldcg(mix + (size_t)r * width + i);
        __syncthreads();
        if (warp == 0) tf_split_gates(row_mix, scale, base, p, post + (size_t)r * hc, hc, hc_eps);
        __syncthreads();
        for (int i = threadIdx.x; i < hc; i += blockDim.x) pre[(size_t)r * hc + i] = p[i];
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        if (threadIdx.x >= nt) {
            tf_sinkhorn_comb(row_mix, base, comb + (size_t)r * hc * hc, hc, iters, hc_eps, scale[2]);
        } else {
            tf_hc_in_row(xr, weight, p, y + (size_t)r * dim, yn + (size_t)r * dim, q + (size_t)r * kp, q_scale + (size_t)r * nblk, ys, lanes,
                         &sums[0], hc, dim, eps, nt, skip, xv, wv);
        }
        if (threadIdx.x == 0) counts[r] = 0u;
        __syncthreads();
    }
}
