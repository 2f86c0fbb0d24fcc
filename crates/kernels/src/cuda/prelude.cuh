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
