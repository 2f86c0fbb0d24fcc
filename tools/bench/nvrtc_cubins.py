#!/usr/bin/env python3
"""Compiles (sm_90a for 90, as compile.rs) the control-free fp8_gemm, mxfp4_gemm, bf16_gemm, grouped_proj and dequant_gemm cubins of a TensorFold tree with NVRTC, as compile.rs does.

Usage: [TF_RS_RING=R] nvrtc_cubins.py REPO ARCH OUTDIR [LIBNVRTC]; LIBNVRTC defaults to libnvrtc.so.13 on the loader path. Prints ptxas' report.
The sources each kernel concatenates are read from its cuda.rs (the include_str! list), so the tree's own layout is used.
"""

import ctypes
import os
import re
import sys


def sources(src, name):
    rs = open(f"{src}/{name}/cuda.rs").read()
    block = rs[rs.index("source:") : rs.index("entries:")]
    return "".join(open(f"{src}/{name}/{f}").read() for f in re.findall(r'include_str!\("([^"]+)"\)', block))


def compile_one(nv, src, name, arch):
    full = f'{open(f"{src}/cuda/prelude.cuh").read()}\n#line 1 "{name}.cu"\n{sources(src, name)}'
    prog = ctypes.c_void_p()
    r = nv.nvrtcCreateProgram(ctypes.byref(prog), full.encode(), f"{name}.cu".encode(), 0, None, None)
    if r != 0:
        raise RuntimeError(f"nvrtcCreateProgram {name}: {r}")
    opts = [f"--gpu-architecture=sm_{arch}a" if arch == "90" else f"--gpu-architecture=sm_{arch}", "--std=c++17", "--fmad=false", "--ptxas-options=--verbose"]
    # TF_RS_RING=R builds the sm_90a prompt tiles with an R-stage ring (cuda_gemm.py reads the same variable).
    if os.environ.get("TF_RS_RING"):
        opts.append(f"-DRS_RING={int(os.environ['TF_RS_RING'])}")
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = nv.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nv.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        raise RuntimeError(f"{name} does not compile:\n{log.value.decode()}")
    nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nv.nvrtcGetCUBIN(prog, cubin)
    return cubin.raw, log.value.decode()


def main():
    repo, arch, out = sys.argv[1:4]
    nv = ctypes.CDLL(sys.argv[4] if len(sys.argv) > 4 else "libnvrtc.so.13")
    for name in ["fp8_gemm", "mxfp4_gemm", "bf16_gemm", "grouped_proj", "dequant_gemm"]:
        cubin, log = compile_one(nv, f"{repo}/crates/kernels/src", name, arch)
        open(f"{out}/{name}.cubin", "wb").write(cubin)
        print(f"{name}: {len(cubin)} bytes")
        print("\n".join(l for l in log.splitlines() if "registers" in l or "Function properties" in l or "spill" in l))


if __name__ == "__main__":
    main()
