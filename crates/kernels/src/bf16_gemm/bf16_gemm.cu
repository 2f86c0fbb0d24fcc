// bf16_gemm: y = x . W^T on tensor cores; x split exactly into three bf16 pieces (hi, mid, lo), K in fixed 32-wide stages (six MMAs into a partial, then one add), so a row's bits never depend on M or the tile.
extern "C" __global__ void __launch_bounds__(256, 2) bf16_gemm(const float* x, const u16* w, float* y, int m, int n, int k) {
    tf_bf16_tiles(x, w, y, m, n, k);
}
