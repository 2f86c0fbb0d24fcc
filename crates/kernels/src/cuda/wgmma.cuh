// Warpgroup MMA (sm_90a) for mma_pipe.cuh's tiles: m64nNk16 f16 products with f32 accumulators, A and B K-major in shared memory in tf_pipe_a's layout (64-byte rows, 16-byte chunks XOR-swizzled by (row >> 1) & 3: the 64-byte swizzle), each element's k16 step the same bits as mma.sync m16n8k16's.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TF_WGMMA 1

// Descriptor of a K-major 64-byte-swizzled operand at shared byte address addr (its 512-byte swizzle atoms aligned): 8-row groups 512 bytes apart.
__device__ __forceinline__ u64 tf_wg_desc(u32 addr) { return (u64)((addr & 0x3ffffu) >> 4) | ((u64)1 << 16) | ((u64)(512 >> 4) << 32) | ((u64)2 << 62); }

// Orders this warpgroup's register and shared accesses before the MMAs that follow.
__device__ __forceinline__ void tf_wg_arrive() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// Closes the MMAs issued since the last commit into one group.
__device__ __forceinline__ void tf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Waits until all of this warpgroup's MMA groups are done (their accumulators readable, their shared operands free).
__device__ __forceinline__ void tf_wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// Waits until at most one of this warpgroup's MMA groups is still running.
__device__ __forceinline__ void tf_wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }

// Makes this thread's ordinary and cp.async writes to shared memory visible to the tensor cores' (async proxy) reads after the next barrier.
__device__ __forceinline__ void tf_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// A warpgroup's f32 accumulator operands: 32 (N 64) or 64 (N 128) registers, the asm strings and their bindings to d.
#define TF_WG_D32 \
    "%0,%1,%2,%3,%4,%5,%6,%7," \
    "%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23," \
    "%24,%25,%26,%27,%28,%29,%30,%31"
#define TF_WG_D64 \
    "%0,%1,%2,%3,%4,%5,%6,%7," \
    "%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23," \
    "%24,%25,%26,%27,%28,%29,%30,%31," \
    "%32,%33,%34,%35,%36,%37,%38,%39," \
    "%40,%41,%42,%43,%44,%45,%46,%47," \
    "%48,%49,%50,%51,%52,%53,%54,%55," \
    "%56,%57,%58,%59,%60,%61,%62,%63"
#define TF_WG_ACC32(d) \
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TF_WG_ACC64(d) \
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d = a b + (acc ? d : 0) for a warpgroup's 64 x N tile: d[i] is row 16 (warp % 4) + lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2.
__device__ __forceinline__ void tf_wgmma_n128(float* d, u64 da, u64 db, int acc) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" TF_WG_D64 "}, %64, %65, p, 1, 1, 0, 0; }"
                 : TF_WG_ACC64(d)
                 : "l"(da), "l"(db), "r"(acc));
}

__device__ __forceinline__ void tf_wgmma_n64(float* d, u64 da, u64 db, int acc) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" TF_WG_D32 "}, %32, %33, p, 1, 1, 0, 0; }"
                 : TF_WG_ACC32(d)
                 : "l"(da), "l"(db), "r"(acc));
}

// tf_wgmma_n128 with A from registers: a is warp (warp % 4)'s 16 x 16 slice in mma.sync m16n8k16's A fragment (rows lane / 4 and + 8, K pairs 2 (lane % 4) and + 8).
__device__ __forceinline__ void tf_wgmma_rs_n128(float* d, const u32* a, u64 db, int acc) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" TF_WG_D64 "}, {%64,%65,%66,%67}, %68, p, 1, 1, 0; }"
                 : TF_WG_ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

__device__ __forceinline__ void tf_wgmma_rs_n64(float* d, const u32* a, u64 db, int acc) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" TF_WG_D32 "}, {%32,%33,%34,%35}, %36, p, 1, 1, 0; }"
                 : TF_WG_ACC32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
#endif
