// index_topk: one block per row (rows past the grid loop); a radix select of the k-th largest ordered score (shared histogram of integer counts), then one pass in index order that keeps scores above it and the lowest-index ties: exact at any block size.

// The CPU's rank order: unsigned order is score order; -0.0 equals +0.0.
__device__ __forceinline__ u32 index_topk_ordered(float score) {
    u32 bits = score == 0.0f ? 0u : __float_as_uint(score);
    return (bits >> 31) ? ~bits : (bits | 0x80000000u);
}

// Exclusive prefix count of `flag` over the block's threads (in thread order) and the block's total; `warps` is shared scratch of 32.
__device__ __forceinline__ int index_topk_scan(bool flag, int* warps, int* total) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    u32 mask = __ballot_sync(0xffffffffu, flag);
    int before = __popc(mask & ((1u << lane) - 1u));
    if (lane == 0) warps[warp] = __popc(mask);
    __syncthreads();
    for (int i = 0; i < warp; ++i) before += warps[i];
    int sum = 0;
    for (int i = 0; i < nwarps; ++i) sum += warps[i];
    *total = sum;
    __syncthreads();
    return before;
}

// Row r's picks land at out[r * stride + col ...], each plus offsets[r] when offsets is not null (-1 padding stays -1).
extern "C" __global__ void index_topk(const float* scores, const int* num_visible, int* out, int rows, int cols, int top_k,
                                      int stride, int col, const int* offsets) {
    tf_grid_begin();
    __shared__ int hist[256];
    __shared__ int warps[32];
    __shared__ u32 prefix_s;
    __shared__ int remaining_s, ties_s;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* row = scores + (size_t)r * cols;
        int* y = out + (size_t)r * stride + col;
        int shift = offsets ? offsets[r] : 0;
        int visible = num_visible[r];
        if (visible <= top_k) {
            for (int j = threadIdx.x; j < top_k; j += blockDim.x) {
#ifdef TF_FAULT_unpadded_short_rows
                if (j < visible) y[j] = j + shift;
#else
                y[j] = j < visible ? j + shift : -1;
#endif
            }
            continue;
        }
        // Radix select, 8 bits a pass from the top: the ordered value T of the k-th largest and how many equal T to take.
        u32 prefix = 0;
        int remaining = top_k;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
            __syncthreads();
            u32 high = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
            for (int j = threadIdx.x; j < visible; j += blockDim.x) {
                u32 v = index_topk_ordered(row[j]);
                if ((v & high) == prefix) atomicAdd(&hist[(v >> shift) & 255u], 1);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                int b = 255;
                while (b > 0 && hist[b] < remaining) remaining -= hist[b--];
                prefix_s = prefix | ((u32)b << shift);
                remaining_s = remaining;
                ties_s = hist[b];
            }
#ifndef TF_FAULT_race_no_sync
            __syncthreads();
#endif
            prefix = prefix_s;
            remaining = remaining_s;
            __syncthreads();
        }
        // `prefix` is T; take every score above it and `remaining` of those equal, lowest indices first.
        int taken = 0, ties = 0, skip = 0;
#ifdef TF_FAULT_tie_higher_index
        skip = ties_s - remaining;
#endif
        for (int j0 = 0; j0 < visible; j0 += blockDim.x) {
            int j = j0 + threadIdx.x;
            u32 v = j < visible ? index_topk_ordered(row[j]) : 0u;
            bool tie = j < visible && v == prefix;
            int tie_count = 0;
            int tie_rank = ties + index_topk_scan(tie, warps, &tie_count);
            bool keep = (j < visible && v > prefix) || (tie && tie_rank >= skip && tie_rank < skip + remaining);
            int kept = 0;
            int at = taken + index_topk_scan(keep, warps, &kept);
            if (keep && at >= 0 && at < top_k) y[at] = j + shift;
            taken += kept;
            ties += tie_count;
        }
    }
}
