#!/usr/bin/env python3
"""Bit-for-bit check: main's GEMM cubins (f32 activations) against gemm2's (f16 activations, pipelined) on the same inputs.

Usage: bits.py BASE_CUBINS NEW_CUBINS. Also checks that the new quantiser's f16 rows equal the old one's f32 rows and scales.
"""

import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cuda_gemm import e4m3_codes, launch, load  # noqa: E402


def bits(a):
    return a.contiguous().view(torch.int32)


def main():
    base, new = sys.argv[1], sys.argv[2]
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    B = {k: load(f"{base}/{k}.cubin", [f"{k}_quant", k]) for k in ["fp8_gemm", "mxfp4_gemm", "grouped_proj"]}
    N = {k: load(f"{new}/{k}.cubin", [f"{k}_quant", k] + ([f"{k}_rows"] if k != "grouped_proj" else [])) for k in ["fp8_gemm", "mxfp4_gemm", "grouped_proj"]}
    torch.manual_seed(0)
    bad = 0
    total = 0
    shapes = [(1, 4096, 8192), (3, 1024, 4096), (16, 300, 200), (64, 257, 100), (65, 129, 136), (200, 2048, 4096),
              (512, 4096, 8192), (1, 7, 96), (130, 512, 1024), (33, 100, 33), (2048, 4096, 2048)]
    for kind in ["fp8_gemm", "mxfp4_gemm"]:
        for m, n, k in shapes:
            if kind == "mxfp4_gemm" and k % 32:
                continue
            x = torch.randn(m, k, device="cuda") * torch.exp(torch.randn(m, k, device="cuda"))
            kp = (k + 7) // 8 * 8
            nb = (k + 127) // 128
            q32, qs_b = torch.zeros(m, k, device="cuda"), torch.zeros(m, nb, device="cuda")
            q16, qs_n = torch.zeros(m, kp, dtype=torch.int16, device="cuda"), torch.zeros(m, nb, device="cuda")
            launch(B[kind][f"{kind}_quant"], min(m, 65535), 256, [x, q32, qs_b, m, k])
            launch(N[kind][f"{kind}_quant"], min(m, 65535), 256, [x, q16, qs_n, m, k])
            if kind == "fp8_gemm":
                w = e4m3_codes(n * k)
                s = torch.randint(110, 130, (((n + 127) // 128) * nb,), dtype=torch.uint8, device="cuda")
            else:
                w = torch.randint(0, 256, (n * k // 2,), dtype=torch.uint8, device="cuda")
                s = torch.randint(118, 126, (n * k // 32,), dtype=torch.uint8, device="cuda")
            yb, yn = torch.full((m, n), 7.0, device="cuda"), torch.full((m, n), 7.0, device="cuda")
            tiles = ((n + 127) // 128) * ((m + 63) // 64)
            runs = [(kind, g) for g in sorted({min(tiles, 65535), 1, 7})]
            if m <= 16:
                runs += [(kind + "_rows", g) for g in sorted({(n + 15) // 16, 1, 7})]
            for entry, grid in runs:
                yn.fill_(7.0)
                launch(B[kind][kind], min(tiles, 65535), 256, [q32, qs_b, w, s, yb, m, n, k])
                launch(N[kind][entry], grid, 256, [q16, qs_n, w, s, yn, m, n, k])
                torch.cuda.synchronize()
                qeq = torch.equal(bits(q16.view(torch.float16)[:, :k].float()), bits(q32)) and torch.equal(bits(qs_b), bits(qs_n))
                diff = (bits(yb) != bits(yn)).sum().item()
                total += 1
                ok = diff == 0 and qeq
                bad += not ok
                print(f"{'ok  ' if ok else 'DIFF'} {entry} m={m} n={n} k={k} grid={grid}: {diff} of {m * n} outputs differ; quant equal {qeq}", flush=True)
    # grouped_proj: groups of o_lora columns over activation groups.
    for rows, groups, o_lora, k in [(1, 8, 1024, 4096), (5, 3, 100, 200), (70, 2, 257, 136), (512, 8, 1024, 4096)]:
        x = torch.randn(rows, groups * k, device="cuda")
        kp, nb = (k + 7) // 8 * 8, (k + 127) // 128
        q32, qs_b = torch.zeros(rows * groups, k, device="cuda"), torch.zeros(rows * groups, nb, device="cuda")
        q16, qs_n = torch.zeros(rows * groups, kp, dtype=torch.int16, device="cuda"), torch.zeros(rows * groups, nb, device="cuda")
        launch(B["grouped_proj"]["grouped_proj_quant"], rows * groups, 256, [x, q32, qs_b, rows * groups, k])
        launch(N["grouped_proj"]["grouped_proj_quant"], rows * groups, 256, [x, q16, qs_n, rows * groups, k])
        n = groups * o_lora
        w = e4m3_codes(n * k)
        s = torch.randint(110, 130, (((n + 127) // 128) * nb,), dtype=torch.uint8, device="cuda")
        yb, yn = torch.full((rows, n), 7.0, device="cuda"), torch.full((rows, n), 7.0, device="cuda")
        tiles = ((o_lora + 127) // 128) * ((rows + 63) // 64)
        for g in range(groups):
            launch(B["grouped_proj"]["grouped_proj"], tiles, 256, [q32, qs_b, w, s, yb, rows, groups, o_lora, k, g])
            launch(N["grouped_proj"]["grouped_proj"], max(1, tiles // 2), 256, [q16, qs_n, w, s, yn, rows, groups, o_lora, k, g])
        torch.cuda.synchronize()
        diff = (bits(yb) != bits(yn)).sum().item()
        total += 1
        bad += diff != 0
        print(f"{'ok  ' if diff == 0 else 'DIFF'} grouped_proj rows={rows} groups={groups} o_lora={o_lora} k={k}: {diff} differ", flush=True)
    print(f"BITS: {total - bad} of {total} cases bit-identical")


if __name__ == "__main__":
    main()
