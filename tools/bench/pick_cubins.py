#!/usr/bin/env python3
"""Copies the control-free cubins of fp8_gemm, mxfp4_gemm and bf16_gemm for one arch out of TensorFold's NVRTC cache.

Usage (after `tensorfold kernel-contract --backend cuda --compile-only --arch sm_90` filled CACHE):
    pick_cubins.py REPO CACHE ARCH OUTDIR [NVRTC_MAJOR NVRTC_MINOR]
The cache key is crates/kernels/src/cuda/compile.rs's: sha256 of the NVRTC version, the options and the full source.
"""

import hashlib
import shutil
import sys

from nvrtc_cubins import sources

KERNELS = ["fp8_gemm", "mxfp4_gemm", "bf16_gemm"]


def main():
    repo, cache, arch, out = sys.argv[1:5]
    major, minor = (sys.argv[5], sys.argv[6]) if len(sys.argv) > 6 else ("13", "0")
    src = f"{repo}/crates/kernels/src"
    prelude = open(f"{src}/cuda/prelude.cuh").read()
    opts = [f"--gpu-architecture=sm_{arch}a" if arch == "90" else f"--gpu-architecture=sm_{arch}", "--std=c++17", "--fmad=false", "--ptxas-options=--verbose"]
    opts_debug = "[" + ", ".join(f'"{o}"' for o in opts) + "]"
    for name in KERNELS:
        # The sources each kernel concatenates, read from its cuda.rs as nvrtc_cubins.py does.
        body = sources(src, name)
        full = f'{prelude}\n#line 1 "{name}.cu"\n{body}'
        h = hashlib.sha256(f"({major}, {minor})\0{opts_debug}\0".encode() + full.encode()).hexdigest()
        path = f"{cache}/{name}-sm_{arch}-{h[:32]}.cubin"
        shutil.copy(path, f"{out}/{name}.cubin")
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
