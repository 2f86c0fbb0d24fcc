// TensorFold CUDA prelude: fixed-width types and exact format conversions, so kernels need no CUDA headers.
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

// bf16 is the top half of an f32.
__device__ __forceinline__ float tf_bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }

// Round to nearest even bf16 (NaN kept quiet).
__device__ __forceinline__ u16 tf_f32_to_bf16(float f) {
    u32 x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (u16)(x >> 16);
}

// Sum of a warp's 32 values in a fixed butterfly order; every lane gets the same bits.
__device__ __forceinline__ float tf_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// acc + a[i] * b[i] over i = first, first + stride, ... < n as one FMA chain in that order, loading 32 (then 8) terms ahead.
__device__ __forceinline__ float tf_strided_dot(const float* a, const float* b, int n, int first, int stride, float acc) {
    int i = first;
    for (; i + 31 * stride < n; i += 32 * stride) {
        float av[32], bv[32];
#pragma unroll
        for (int u = 0; u < 32; ++u) {
            av[u] = a[i + u * stride];
            bv[u] = b[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < 32; ++u) acc = fmaf(av[u], bv[u], acc);
    }
    for (; i + 7 * stride < n; i += 8 * stride) {
        float av[8], bv[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            av[u] = a[i + u * stride];
            bv[u] = b[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) acc = fmaf(av[u], bv[u], acc);
    }
    for (; i < n; i += stride) acc = fmaf(a[i], b[i], acc);
    return acc;
}

// tf_strided_dot(a, b, n, first, stride, 0) with b's first H terms in registers (held[j] = b[first + j * stride], n <= first + H * stride): the same FMA chain, a loaded 32 terms ahead.
template <int H>
__device__ __forceinline__ float tf_held_dot(const float* a, const float* held, int n, int first, int stride) {
    float acc = 0.0f;
#pragma unroll
    for (int j0 = 0; j0 < H; j0 += 32) {
        float av[32];
#pragma unroll
        for (int u = 0; u < 32; ++u) {
            int i = first + (j0 + u) * stride;
            av[u] = i < n ? a[i] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 32; ++u)
            if (first + (j0 + u) * stride < n) acc = fmaf(av[u], held[j0 + u], acc);
    }
    return acc;
}

// The logistic function as the mHC gates take it.
__device__ __forceinline__ float tf_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// `2^ceil(log2(max(amax, floor) / qmax))`, exactly as the CPU's pow2_scale.
__device__ __forceinline__ float tf_pow2_scale(float amax, float floor, float qmax) {
    u32 b = __float_as_uint(fmaxf(amax, floor) / qmax);
    int e = (int)((b >> 23) & 255u) - 127 + ((b & 0x7fffffu) != 0u);
    return __uint_as_float((u32)(e + 127) << 23);
}

// Round |q| <= qmax to a float format's grid, ties to even: mantissa rounding for normals, a magic add below them.
__device__ __forceinline__ float tf_round_grid(float q, float min_normal, float magic, int drop_bits) {
    u32 qi = __float_as_uint(q);
    u32 a = qi & 0x7fffffffu;
    float af = __uint_as_float(a);
    u32 r;
    if (af < min_normal) {
        r = __float_as_uint(__fsub_rn(__fadd_rn(af, magic), magic));
    } else {
        u32 half = (1u << (drop_bits - 1)) - 1u;
        r = (a + half + ((a >> drop_bits) & 1u)) & (0xffffffffu << drop_bits);
    }
    return __uint_as_float(r | (qi & 0x80000000u));
}

// f32 to f16 bits, round to nearest (exact for e4m3 grid values).
__device__ __forceinline__ u16 tf_f16(float x) {
    u16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

// DeepSeek's act_quant of xr[lo..hi) by one warp: the block's power-of-two scale to *scale, its e4m3 grid values q = round(x / s) as f16 to qr[lo..hi).
__device__ __forceinline__ void tf_fp8_quant_block(const float* xr, u16* qr, float* scale, int lo, int hi, int lane) {
    float m = 0.0f;
    for (int i = lo + lane; i < hi; i += 32) m = fmaxf(m, fabsf(xr[i]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = tf_pow2_scale(m, 1e-4f, 448.0f);
    for (int i = lo + lane; i < hi; i += 32) qr[i] = tf_f16(tf_round_grid(fminf(fmaxf(xr[i] / s, -448.0f), 448.0f), 1.0f / 64.0f, 24576.0f, 20));
    if (lane == 0) *scale = s;
}

// FP8 e4m3 round trip of v at block scale s.
__device__ __forceinline__ float tf_round_trip_e4m3(float v, float s) {
    float q = fminf(fmaxf(v / s, -448.0f), 448.0f);
    return tf_round_grid(q, 1.0f / 64.0f, 24576.0f, 20) * s;
}

// FP4 e2m1 round trip of v at block scale s.
__device__ __forceinline__ float tf_round_trip_e2m1(float v, float s) {
    float q = fminf(fmaxf(v / s, -6.0f), 6.0f);
    return tf_round_grid(q, 1.0f, 6291456.0f, 22) * s;
}

// `ln(1 + e^x)` as `max(x, 0) + log1p(e^-|x|)`: no overflow, accurate to a few ulp.
__device__ __forceinline__ float tf_softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

// FP8 e4m3fn code to f32, exactly (0x7f and 0xff are NaN).
__device__ __forceinline__ float tf_e4m3_to_f32(u8 c) {
    if ((c & 0x7fu) == 0x7fu) return __int_as_float(0x7fc00000);
    u32 e = (c >> 3) & 15u, m = c & 7u;
    float v = e == 0u ? (float)m * 0.001953125f : __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (c & 0x80u) ? -v : v;
}

// e8m0 scale code to f32: 2^(code - 127), exactly (255 is NaN).
__device__ __forceinline__ float tf_e8m0_to_f32(u8 c) {
    if (c == 255u) return __int_as_float(0x7fc00000);
    return c == 0u ? __uint_as_float(0x00400000u) : __uint_as_float((u32)c << 23);
}

// e^x exactly as the CPU's math::exp: a fixed FMA polynomial after a ties-even reduction by ln 2.
__device__ __forceinline__ float tf_exp_cpu(float x) {
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

// Lets the next kernel on the stream start its blocks now (programmatic launch, sm_90+); a no-op elsewhere.
__device__ __forceinline__ void tf_grid_open() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the kernels this one depends on have finished and their writes are visible; nothing before it may touch their data.
__device__ __forceinline__ void tf_grid_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// An entry's first statement: open the next kernel's launch, then wait for this one's inputs.
__device__ __forceinline__ void tf_grid_begin() {
    tf_grid_open();
    tf_grid_wait();
}
