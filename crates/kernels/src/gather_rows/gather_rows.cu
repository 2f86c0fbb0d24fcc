// gather_rows: y[r] = x[idx[r]] for f32 rows of dim values; one block per output row (rows past the grid loop), the source row broadcast through shared memory; an index outside the source gives a NaN row.
extern "C" __global__ void gather_rows(const float* x, const i32* idx, float* y, int rows, int dim, int src_rows) {
    tf_grid_begin();
    __shared__ int from;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        if (threadIdx.x == 0) {
            int v = idx[r];
#ifdef TF_FAULT_id_off_by_one
            v = (v + 1) % src_rows;
#endif
            from = v;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        int v = from;
        bool valid = v >= 0 && v < src_rows;
        const float* row = x + (size_t)(valid ? v : 0) * dim;
        float* out = y + (size_t)r * dim;
        if (dim % 4 == 0 && (size_t)x % 16 == 0 && (size_t)y % 16 == 0) {
            for (int j = threadIdx.x; j < dim / 4; j += blockDim.x)
                ((float4*)out)[j] = valid ? ((const float4*)row)[j] : make_float4(__int_as_float(0x7fc00000), __int_as_float(0x7fc00000), __int_as_float(0x7fc00000), __int_as_float(0x7fc00000));
        } else {
            for (int j = threadIdx.x; j < dim; j += blockDim.x) out[j] = valid ? row[j] : __int_as_float(0x7fc00000);
        }
        __syncthreads();
    }
}
