#!/usr/bin/env python3
"""Copies the control-free cubins of fp8_gemm, mxfp4_gemm and bf16_gemm for one arch out of TensorFold's NVRTC cache.

Usage (after `tensorfold kernel-contract --backend cuda --compile-only --arch sm_90` filled CACHE):
    pick_cubins.py REPO CACHE ARCH OUTDIR [NVRTC_MAJOR NVRTC_MINOR]
The cache key is crates/kernels/src/cuda/compile.rs's: sha256 of the NVRTC version, the options and the full source.
"""

import hashlib
import shutil
import sys

KERNELS = {
    "fp8_gemm": ["cuda/mma.cuh", "cuda/mma_pipe.cuh", "fp8_gemm/fp8_gemm.cu"],
    "mxfp4_gemm": ["cuda/mma.cuh", "cuda/mma_pipe.cuh", "fp8_gemm/fp8_gemm.cu", "mxfp4_gemm/mxfp4_gemm.cu"],
    "bf16_gemm": ["cuda/mma.cuh", "bf16_gemm/bf16_gemm.cu"],
}


def main():
    repo, cache, arch, out = sys.argv[1:5]
    major, minor = (sys.argv[5], sys.argv[6]) if len(sys.argv) > 6 else ("13", "0")
    src = f"{repo}/crates/kernels/src"
    prelude = open(f"{src}/cuda/prelude.cuh").read()
    opts = [f"--gpu-architecture=sm_{arch}", "--std=c++17", "--fmad=false", "--ptxas-options=--verbose"]
    opts_debug = "[" + ", ".join(f'"{o}"' for o in opts) + "]"
    for name, files in KERNELS.items():
        body = "".join(open(f"{src}/{f}").read() for f in files)
        full = f'{prelude}\n#line 1 "{name}.cu"\n{body}'
        h = hashlib.sha256(f"({major}, {minor})\0{opts_debug}\0".encode() + full.encode()).hexdigest()
        path = f"{cache}/{name}-sm_{arch}-{h[:32]}.cubin"
        shutil.copy(path, f"{out}/{name}.cubin")
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
