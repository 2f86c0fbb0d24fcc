#!/usr/bin/env python3
"""Writes copies of a TensorFold tree's CUDA kernels with one stage of `tf_mma_rows` (fp8_gemm_rows_long's path) left out or changed, for timing by difference.

Usage: rows_variants.py REPO OUTDIR VARIANT...; each variant lands in OUTDIR/VARIANT/crates/kernels/src, ready for `nvrtc_cubins.py OUTDIR/VARIANT 90 DIR`
and `cuda_gemm.py DIR --long`. Every patch must match the tree's source exactly once, so a moved source fails here instead of timing the wrong thing.
Variants: base (unchanged); noW (no weight loads: lanes make their words); noA (activations and scales loaded for the first round only); noSync (no
barriers); noAdd (no K-ordered adds); noPerm (weights staged unpermuted); noStage (weights not staged, kept live by a compare); D2 (weights two rounds
ahead); noCvt (e4m3 words masked instead of converted); intCvt (the integer conversion of sm_80 on every arch); noMma (an add in place of each MMA);
clk (block 0's thread 0 writes clock64 stamps a round, its total cycles and globaltimer nanoseconds into y[0..14], read with cuda_gemm.py's
TF_DUMP_Y=1); noWA, noWAS, noCM, noPermA: combinations. The ring path `tf_mma_rows_lo` (`_rows8`, slots): loNoW (zero-byte copies), loNoA (activations
and scales for the first item only), loNoPerm (no in-place permute). Only timings mean anything: the outputs are wrong.
"""

import shutil
import sys

V = {
 "base": [],
 "noW": [("wp[p] = tf_ldg16(w + (n0 + pr(p)) * wstride + c * WROW + 16 * pk(p));", "wp[p] = make_uint4((u32)lane * 0x01010101u ^ (u32)rr, (u32)p * 0x01010101u, (u32)c * 0x01010101u, 0x3c3c3c3cu);")],
 "noA": [("        auto load_a = [&](int rr) {\n            int r = rev ? rounds - 1 - rr : rr;", "        auto load_a = [&](int rr) {\n            if (rr > 0 && rr < rounds) return;\n            int r = rev ? rounds - 1 - rr : rr;")],
 "noSync": [("            __syncthreads();\n#endif\n            // The round's partials into each output, in K order: per 128-block, as tf_mma_pipe's closes; eight", "#endif\n            // The round's partials into each output, in K order: per 128-block, as tf_mma_pipe's closes; eight"),
            ("            }\n            __syncthreads();\n        };", "            }\n        };")],
 "noAdd": [("            if (2 * warp < m)\n#pragma unroll\n            for (int i0 = 0; i0 < 8 * P; i0 += 8) {", "            if (2 * warp < m && rr < 0)\n#pragma unroll\n            for (int i0 = 0; i0 < 8 * P; i0 += 8) {")],
 "noCvt": [("    asm(\"{.reg .b16 lo, hi;\\n\\tmov.b32 {lo, hi}, %2;\\n\\tcvt.rn.f16x2.e4m3x2 %0, lo;\\n\\tcvt.rn.f16x2.e4m3x2 %1, hi;\\n\\t}\"\n        : \"=r\"(b[0]), \"=r\"(b[1])\n        : \"r\"(x));", "    b[0] = x & 0x3c3c3c3cu, b[1] = (x >> 2) & 0x3c3c3c3cu;")],
 "intCvt": [("#if __CUDA_ARCH__ >= 890\n    asm(\"{.reg .b16 lo, hi;", "#if 0\n    asm(\"{.reg .b16 lo, hi;")],
 "noMma": [("                        if constexpr (HI)\n                            tf_mma_f16(part[j / PD][ni], af[j], b);\n                        else\n                            tf_mma_f16_lo(part[j / PD][ni], af[j], b);", "                        part[j / PD][ni][0] += __int_as_float((af[j][0] ^ b[0]) & 0x3fffffffu), part[j / PD][ni][1] += __int_as_float((af[j][2] ^ b[1]) & 0x3fffffffu);")],
 "noPerm": [("                *(uint4*)&ws[row * WROW + (sw << 4)] = tf_rows_permute<FMT>(wp[p]);", "                *(uint4*)&ws[row * WROW + (sw << 4)] = wp[p];")],
 "noStage": [("                *(uint4*)&ws[row * WROW + (sw << 4)] = tf_rows_permute<FMT>(wp[p]);", "                if (wp[p].x == 0x12345678u && wp[p].y == 0x9abcdef0u) *(uint4*)&ws[row * WROW + (sw << 4)] = wp[p];")],
 "loNoW": [("                    tf_cp_async16_at(dst + poff(p), bytes > 0 ? src : w, bytes);", "                    tf_cp_async16_at(dst + poff(p), w, 0);")],
 "loNoA": [("    auto load_a = [&](int it, int tq, int rr) {\n        bool live = it < items;", "    auto load_a = [&](int it, int tq, int rr) {\n        if (it > 0 && it < items) return;\n        bool live = it < items;")],
 "loNoPerm": [("            *(uint4*)&ws[poff(p)] = tf_rows_permute<FMT>(*(const uint4*)&ws[poff(p)]);", "            *(uint4*)&ws[poff(p)] = *(const uint4*)&ws[poff(p)];")],
 "D2": [("constexpr int D = FMT == MMA_FP8 ? 1 : 2;", "constexpr int D = FMT == MMA_FP8 ? 2 : 2;")],
}
V["clk"] = [('    bool waited = !OPEN;\n    for (int tile', '    bool waited = !OPEN;\n    long long tfc0 = clock64(); unsigned long long tfg0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(tfg0)); long long tfst[12] = {0}; int tfn = 0;\n    for (int tile'), ('        load_a(0);\n        for (int rb = 0; rb < rounds; rb += D)\n#pragma unroll\n            for (int d = 0; d < D; ++d) round(rb + d, wb[d]);', '        load_a(0);\n        if (tfn < 12) tfst[tfn++] = clock64() - tfc0;\n        for (int rb = 0; rb < rounds; rb += D)\n#pragma unroll\n            for (int d = 0; d < D; ++d) { round(rb + d, wb[d]); if (tfn < 12) tfst[tfn++] = clock64() - tfc0; }'), ("    if (!waited) tf_grid_wait();\n}\n\n// x's four bytes", '    if (!waited) tf_grid_wait();\n    if (blockIdx.x == 0 && threadIdx.x == 0) { unsigned long long tfg1; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(tfg1)); y[0] = __int_as_float((int)(clock64() - tfc0)); y[1] = __int_as_float((int)(tfg1 - tfg0)); for (int i = 0; i < 12; ++i) y[2 + i] = __int_as_float((int)tfst[i]); }\n}\n\n// x\'s four bytes')]
V["noPermA"] = V["noPerm"] + V["noA"]
V["noCM"] = V["noCvt"] + V["noMma"]
V["noWA"] = V["noW"] + V["noA"]
V["noWAS"] = V["noW"] + V["noA"] + V["noSync"]

def main():
    src, out = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        d = f"{out}/{name}/crates/kernels/src"
        shutil.rmtree(f"{out}/{name}", ignore_errors=True)
        shutil.copytree(f"{src}/crates/kernels/src", d)
        p = f"{d}/cuda/mma_rows.cuh"
        s = open(p).read()
        for a, b in V[name]:
            if s.count(a) != 1:
                raise SystemExit(f"{name}: a patch matches {s.count(a)} times, not once: {a[:80]!r}")
            s = s.replace(a, b)
        open(p, "w").write(s)
        print(name, "written")


if __name__ == "__main__":
    main()
