// rope: one block per (row, head); each pair's cos/sin from the exact f64 angle into shared memory (every block of a row the same), then the head's pairs rotated with one FMA.
#define MAX_PAIRS 512

extern "C" __global__ void rope(const float* x, const i32* positions, const float* inv_freq, float* y, int rows, int row_len,
                                int head_dim, int pairs, int inverse) {
    tf_grid_begin();
    __shared__ float cs[MAX_PAIRS];
    __shared__ float sn[MAX_PAIRS];
    int rope_dim = 2 * pairs, heads = row_len / head_dim;
    for (long t = blockIdx.x; t < (long)rows * heads; t += gridDim.x) {
        int r = (int)(t / heads), h = (int)(t % heads);
        int pos = positions[r];
#ifdef TF_FAULT_position_off_by_one
        pos += 1;
#endif
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            double s, c;
            sincos((double)pos * (double)inv_freq[p], &s, &c);
            cs[p] = (float)c;
            sn[p] = inverse ? -(float)s : (float)s;
        }
#ifndef TF_FAULT_race_no_sync
        __syncthreads();
#endif
        const float* xr = x + (size_t)r * row_len + (size_t)h * head_dim;
        float* yr = y + (size_t)r * row_len + (size_t)h * head_dim;
        bool skip = false;
#ifdef TF_FAULT_skip_last_row
        skip = r == rows - 1;
#endif
        for (int i = threadIdx.x; i < head_dim && !skip; i += blockDim.x) {
            int k = i - (head_dim - rope_dim);
            float v = xr[i];
            if (k >= 0) {
                int p = k >> 1;
                float other = xr[(k & 1) ? i - 1 : i + 1];
                v = (k & 1) ? fmaf(v, cs[p], other * sn[p]) : fmaf(v, cs[p], other * -sn[p]);
            }
            yr[i] = v;
        }
        __syncthreads();
    }
}
