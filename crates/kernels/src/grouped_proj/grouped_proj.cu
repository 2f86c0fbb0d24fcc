// grouped_proj: fp8_gemm per output group g over activation group g; the same quantiser and tiles as fp8_gemm, launched once per group.
extern "C" __global__ void grouped_proj_quant(const float* x, u16* q, float* q_scale, int rows, int k) {
    tf_grid_begin();
    tf_fp8_quant_rows(x, q, q_scale, rows, k);
}

// Group g: rows of q are the token rows' group-g activations (stride groups * k rounded up to 8); columns g * o_lora .. of y.
extern "C" __global__ void __launch_bounds__(TF_PIPE_THREADS, 1) grouped_proj(const u16* q, const float* q_scale, const u8* w, const u8* w_scale,
                                                              float* y, int m, int groups, int o_lora, int k, int g) {
    tf_grid_begin();
    int nblk = (k + QB - 1) / QB, kp = (k + 7) / 8 * 8;
    int ga = g;
#ifdef TF_FAULT_wrong_group
    ga = 0;
#endif
    tf_fp8_tiles(q + (size_t)ga * kp, groups * kp, q_scale + (size_t)ga * nblk, groups * nblk, w + (size_t)g * o_lora * k, w_scale,
                 g * o_lora, y + (size_t)g * o_lora, groups * o_lora, m, o_lora, k);
}
