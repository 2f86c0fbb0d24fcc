// hc_pre_mix: hc_pre (hc_pre.cu's tf_hc_collapse) with the row's pre gates made from its mix, as hc_split_sinkhorn makes them.

extern "C" __global__ void hc_pre_mix(const float* x, const float* mix, const float* scale, const float* base, float* out, int rows, int hc,
                                      int dim, float eps) {
    tf_grid_begin();
    int width = (2 + hc) * hc;
    float s0 = scale[0];
#ifdef TF_FAULT_lost_pre_scale
    s0 = 1.0f;
#endif
    tf_hc_collapse(x, out, rows, hc, dim, [=](int r, int s) { return tf_sigmoid(fmaf(mix[(size_t)r * width + s], s0, base[s])) + eps; });
}
