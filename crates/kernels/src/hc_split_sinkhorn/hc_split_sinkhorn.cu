// hc_split_sinkhorn: one block per row (rows past the grid loop); warp 0 does the gates and the Sinkhorn passes (lane i: row i, then column i, the CPU's scalar order), then the whole block writes comb from shared memory.
#define MAX_HC 16

// e^x exactly as the CPU's math::exp: a fixed FMA polynomial after a ties-even reduction by ln 2.
__device__ __forceinline__ float hc_split_sinkhorn_exp(float x) {
    if (x != x) return x;
    if (x > 88.72284f) return __int_as_float(0x7f800000);
    if (x < -103.97208f) return 0.0f;
    float n = rintf(x * 1.44269504088896340736f);
    float r = fmaf(n, -1.4286068e-6f, fmaf(n, -0.69314575f, x));
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int ni = (int)n;
    int a = min(max(ni, -126), 127);
    int b = ni - a;
    float pa = p * __int_as_float((a + 127) << 23);
    return b == 0 ? pa : pa * __int_as_float(min(max(b + 127, 1), 254) << 23);
}

__device__ __forceinline__ float hc_split_sinkhorn_sigmoid(float x) { return 1.0f / (1.0f + hc_split_sinkhorn_exp(-x)); }

// Column j divided by (its sum over rows in ascending order + eps).
__device__ __forceinline__ void hc_split_sinkhorn_column(float* c, int hc, int j, float eps) {
    float sum = 0.0f;
    for (int i = 0; i < hc; ++i) sum += c[i * hc + j];
    float denom = sum + eps;
    for (int i = 0; i < hc; ++i) c[i * hc + j] /= denom;
}

extern "C" __global__ void hc_split_sinkhorn(const float* mix, const float* scale, const float* base, float* pre, float* post,
                                             float* comb, int rows, int hc, int iters, float eps) {
    __shared__ float c[MAX_HC * MAX_HC];
    int width = (2 + hc) * hc;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        const float* m = mix + (size_t)r * width;
        if (threadIdx.x < 32) {
            int i = threadIdx.x;
            float comb_scale = scale[2];
#ifdef TF_FAULT_lost_comb_scale
            comb_scale = 1.0f;
#endif
            for (int k = i; k < hc * hc; k += 32) c[k] = fmaf(m[2 * hc + k], comb_scale, base[2 * hc + k]);
            if (i < hc) {
                pre[(size_t)r * hc + i] = hc_split_sinkhorn_sigmoid(fmaf(m[i], scale[0], base[i])) + eps;
                post[(size_t)r * hc + i] = 2.0f * hc_split_sinkhorn_sigmoid(fmaf(m[hc + i], scale[1], base[hc + i]));
            }
            __syncwarp();
            if (i < hc) {
                float* row = c + i * hc;
                float mx = __int_as_float(0xff800000);
                for (int j = 0; j < hc; ++j) mx = fmaxf(mx, row[j]);
                float sum = 0.0f;
                for (int j = 0; j < hc; ++j) {
                    row[j] = hc_split_sinkhorn_exp(row[j] - mx);
                    sum += row[j];
                }
                for (int j = 0; j < hc; ++j) row[j] = row[j] / sum + eps;
            }
            __syncwarp();
            if (i < hc) hc_split_sinkhorn_column(c, hc, i, eps);
            __syncwarp();
            for (int it = 1; it < iters; ++it) {
                if (i < hc) {
                    float* row = c + i * hc;
                    float sum = 0.0f;
                    for (int j = 0; j < hc; ++j) sum += row[j];
                    float denom = sum + eps;
                    for (int j = 0; j < hc; ++j) row[j] /= denom;
                }
                __syncwarp();
                if (i < hc) hc_split_sinkhorn_column(c, hc, i, eps);
                __syncwarp();
            }
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        for (int k = threadIdx.x; k < hc * hc; k += blockDim.x) {
#ifdef TF_FAULT_transposed_comb
            comb[(size_t)r * hc * hc + k] = c[(k % hc) * hc + k / hc];
#else
            comb[(size_t)r * hc * hc + k] = c[k];
#endif
        }
        __syncthreads();
    }
}
