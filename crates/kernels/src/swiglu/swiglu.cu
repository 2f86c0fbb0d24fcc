// swiglu: one block per (slice of blockDim values, row) (items past the grid loop), the route weight broadcast through shared memory.

// One value: rw * (silu(min(g, limit)) * clamp(u, -up_limit, up_limit)).
__device__ __forceinline__ float tf_swiglu(float gate, float up, float rw, float limit, float up_limit) {
    float g = fminf(gate, limit);
    float u = fminf(fmaxf(up, -up_limit), up_limit);
    float silu = g / (1.0f + expf(-g));
    return rw * (silu * u);
}

extern "C" __global__ void swiglu(const float* gate, const float* up, const float* route_weight, float* h, int rows,
                                  int inter, float limit) {
    tf_grid_begin();
    __shared__ float w;
    int slices = (inter + blockDim.x - 1) / blockDim.x;
    for (int item = blockIdx.x; item < rows * slices; item += gridDim.x) {
        int r = item % rows, i0 = (item / rows) * blockDim.x;
#ifdef TF_FAULT_skip_last_row
        if (r == rows - 1) continue;
#endif
        if (threadIdx.x == 0) w = route_weight[r];
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        float rw = w;
        float up_limit = limit;
#ifdef TF_FAULT_no_up_clamp
        up_limit = __int_as_float(0x7f800000);
#endif
        int i = i0 + threadIdx.x;
        if (i < inter) {
            size_t at = (size_t)r * inter + i;
            h[at] = tf_swiglu(gate[at], up[at], rw, limit, up_limit);
        }
        __syncthreads();
    }
}
