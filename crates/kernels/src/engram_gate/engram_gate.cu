// engram_gate: one block per token row; per stream the dot and both sums of squares in 256 fixed f64 lanes, warp 0 reduces them and takes the gate, then every value one f32 FMA.
#define LANES 256
#define MAX_HC 16
#define GATE_FLOOR 1e-6

extern "C" __global__ void engram_gate(const float* x, const float* keys, const float* v, const float* q_weight,
                                       const float* k_weight, float* out, int rows, int hc, int dim, double eps) {
    tf_grid_begin();
    __shared__ double lanes[3][LANES];
    __shared__ float gates[MAX_HC];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int s = 0; s < hc; ++s) {
            const float* xs = x + ((size_t)r * hc + s) * dim;
            const float* ks = keys + ((size_t)r * hc + s) * dim;
            for (int l = threadIdx.x; l < LANES; l += blockDim.x) {
                double dot = 0.0, xx = 0.0, kk = 0.0;
                for (int j = l; j < dim; j += LANES) {
                    double a = xs[j], k = ks[j];
                    dot += a * (double)q_weight[s * dim + j] * (double)k_weight[s * dim + j] * k;
                    xx += a * a;
                    kk += k * k;
                }
                lanes[0][l] = dot;
                lanes[1][l] = xx;
                lanes[2][l] = kk;
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            if (threadIdx.x < 32) {
                double sum[3];
                for (int q = 0; q < 3; ++q) {
                    double t = 0.0;
                    for (int j = 0; j < LANES / 32; ++j) t += lanes[q][threadIdx.x * (LANES / 32) + j];
                    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
                    sum[q] = t;
                }
                if (threadIdx.x == 0) {
                    double d = sum[0] / sqrt(sum[1] / dim + eps) / sqrt(sum[2] / dim + eps) / sqrt((double)dim);
                    double mag = sqrt(fmax(fabs(d), GATE_FLOOR));
                    double z = d == 0.0 ? 0.0 : d > 0.0 ? mag : -mag;
#ifdef TF_FAULT_unsigned_gate
                    z = d == 0.0 ? 0.0 : mag;
#endif
                    gates[s] = (float)(1.0 / (1.0 + exp(-z)));
                }
            }
            __syncthreads();
        }
        for (int i = threadIdx.x; i < hc * dim; i += blockDim.x) {
            size_t at = (size_t)r * hc * dim + i;
            out[at] = fmaf(gates[i / dim], v[(size_t)r * dim + i % dim], x[at]);
        }
        __syncthreads();
    }
}
