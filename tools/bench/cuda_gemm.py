#!/usr/bin/env python3
"""Times TensorFold's tensor-core GEMM kernels (compiled cubins) against PyTorch matmuls of the same shapes on one GPU.

Usage: cuda_gemm.py CUBIN_DIR [--json OUT] [--m 1,64,512,2048] [--only fp8,mxfp4,slots,dequant]; CUBIN_DIR holds fp8_gemm.cubin, mxfp4_gemm.cubin,
bf16_gemm.cubin and dequant_gemm.cubin for this GPU's arch
(`nvrtc_cubins.py` compiles them). `--no-torch` skips the PyTorch measuring sticks; `--no-rows8` keeps up to 8 rows on the `_rows` entries. `--shapes NAME:KIND:N:K,...` times those shapes instead (KIND fp8, fp4, slots, dequant or bf16). `--long` sends every FP8 shape of up to 8 rows to `_rows_long` (one block a tile); `--cl` sends FP8 shapes of up to 4 rows with K >= 4096 to `_rows_cl` (a cluster of 4 blocks a tile) where the cubin has it. `--beside` times wq_a and wkv as the attention front runs them (two streams) instead. `TF_PIPE_ALL_TILES=1` launches the sm_90a prompt entries a block a tile instead of one an SM. `TF_DUMP_Y=1` prints the SM clock (by a GPU sleep of known cycles) and each shape's first 14 outputs as integers (for kernels built to write timings there). `--rows-grid` launches the `_rows` and slots entries on the launchers' grid (two or three blocks an SM, `--per-sm N` to try others, tiles shared out, shares differing by at most one; `--grid-shares`: as many blocks as equal shares need, the launchers' grid before; `--slots-warps W`: slots as a warp a tile, W warps a block) and up to 8 FP8 rows with K >= 4096 on `_rows_long` (one block a tile) where the cubin has it, else one block a tile. Inputs are seeded, so two cubin sets that compute the same bits print the same `y_sha`. Each row: median ms of the GEMM launch alone, back to back (activations already quantised to f16 rows
of K rounded up to 8; `slots` rows, at 1 row only: mxfp4_gemm_slots over 6 routed experts, one quantised row each, two matrices in one launch for w1/w3;
`dequant` rows: dequant_gemm_rows, all 8 groups of wo_a in one launch), its TFLOP/s and weight GB/s (also with the launches cycling through copies of the weights
that together exceed the L2, `rot`), and the same shape's bf16 `torch.matmul` and FP8 `torch._scaled_mm` TFLOP/s measured in this run.
"""

import ctypes
import hashlib
import json
import os
import sys

import torch

CU = ctypes.CDLL("libcuda.so.1")


def check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")


def load(path, entries, optional=()):
    module = ctypes.c_void_p()
    data = open(path, "rb").read()
    check(CU.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(data)), f"cuModuleLoadData {path}")
    out = {}
    for e in list(entries) + list(optional):
        f = ctypes.c_void_p()
        r = CU.cuModuleGetFunction(ctypes.byref(f), module, e.encode())
        if e in optional and r != 0:
            continue
        check(r, f"cuModuleGetFunction {e}")
        out[e] = f
    return out


def pipe_smem():
    """Dynamic shared bytes of the sm_90a prompt tiles (crates/kernels/src/cuda/dynamic.rs), the ring's stages from TF_RS_RING; TF_PIPE_SMEM=N passes N instead (cubins of other layouts)."""
    if torch.cuda.get_device_capability(0) != (9, 0):
        return 0
    if os.environ.get("TF_PIPE_SMEM"):
        return int(os.environ["TF_PIPE_SMEM"])
    ring, stage = int(os.environ.get("TF_RS_RING", "4")), 128 * 32 * 2
    return max(ring * (4 * stage + 128 * 128 + 4 * (128 // 4 + 4) * 4 + 2 * 8), 5 * stage + 2 * 128 * 4)


def pipe_threads():
    """Threads of a block of the prompt tiles (crates/kernels/src/cuda/dynamic.rs): on sm_90a two MMA warpgroups and the one feeding them; TF_PIPE_THREADS=N launches N (cubins of other layouts)."""
    if os.environ.get("TF_PIPE_THREADS"):
        return int(os.environ["TF_PIPE_THREADS"])
    return 384 if torch.cuda.get_device_capability(0) == (9, 0) else 256


def launch(f, grid, block, args, smem=0, stream=None):
    vals = []
    for a in args:
        if isinstance(a, torch.Tensor):
            vals.append(ctypes.c_uint64(a.data_ptr()))
        else:
            vals.append(ctypes.c_int32(a))
    ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
    stream = ctypes.c_void_p((stream or torch.cuda.current_stream()).cuda_stream)
    if smem > 48 * 1024:
        check(CU.cuFuncSetAttribute(f, 8, smem), "cuFuncSetAttribute")  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(CU.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, stream, ptrs, None), "cuLaunchKernel")


def rows_blocks(tiles, per, per_sm):
    """The `_rows` launchers' column blocks (fp8_gemm/cuda.rs rows_blocks) with --rows-grid, else one a tile."""
    if "--rows-grid" not in sys.argv:
        return tiles
    if "--per-sm" in sys.argv:
        per_sm = int(sys.argv[sys.argv.index("--per-sm") + 1])
    want = max(per_sm * torch.cuda.get_device_properties(0).multi_processor_count // max(per, 1), 1)
    if "--grid-shares" in sys.argv:
        return -(-tiles // -(-tiles // want))
    return min(tiles, want)


def timed(fn, reps=20, batch=20):
    """Median ms of one call: `batch` calls queued behind a GPU sleep, so the host's launch cost stays out of the events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(4_000_000)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    times.sort()
    return times[len(times) // 2]


def e4m3_codes(n):
    c = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    return torch.where((c & 0x7F) == 0x7F, c & 0xF8, c)


def copies(w):
    """The weights and enough clones of them that cycling through all of them reads past a 50 MB L2."""
    size = w.numel() * w.element_size()
    return [w] + [w.clone() for _ in range(-(-256_000_000 // size) - 1)]


def beside(fp8, ms_list):
    """wkv [512, 4096] on a second stream forked from the process stream, then wq_a [1024, 4096] on it, joined (as the attention front queues them), against each alone and torch's bf16 matmul of both as one [1536, 4096] weight."""
    k, ns = 4096, (1024, 512)
    side = torch.cuda.Stream()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m in ms_list:
        x = torch.randn(m, k, device="cuda") * 2
        q16 = torch.zeros(m, k, dtype=torch.int16, device="cuda")
        qs = torch.empty(m, k // 128, device="cuda")
        launch(fp8["fp8_gemm_quant"], min(m, 65535), 256, [x, q16, qs, m, k])
        parts = []
        for n in ns:
            w = e4m3_codes(n * k)
            s = torch.full((((n + 127) // 128) * (k // 128),), 120, dtype=torch.uint8, device="cuda")
            grid = min(((n + 127) // 128) * ((m + 63) // 64), sms if pipe_threads() == 384 else 65535)
            parts.append((w, s, torch.empty(m, n, device="cuda"), n, grid))

        def one(p, stream=None):
            w, s, y, n, grid = p
            launch(fp8["fp8_gemm"], grid, pipe_threads(), [q16, qs, w, s, y, m, n, k], pipe_smem(), stream)

        def both():
            main = torch.cuda.current_stream()
            side.wait_stream(main)
            one(parts[1], side)
            one(parts[0])
            main.wait_stream(side)

        both()
        torch.cuda.synchronize()
        shas = [hashlib.sha256(p[2].cpu().numpy().tobytes()).hexdigest()[:16] for p in parts]
        ms_a, ms_kv, ms_both = timed(lambda: one(parts[0])), timed(lambda: one(parts[1])), timed(both)
        flops = [2.0 * m * n * k for n in ns]
        a16 = x.to(torch.bfloat16)
        b16 = [torch.randn(n, k, device="cuda").to(torch.bfloat16) for n in ns]
        cat16 = torch.cat(b16)
        ms_cat = 0 if "--no-torch" in sys.argv else timed(lambda: torch.matmul(a16, cat16.T))
        ms_two = 0 if "--no-torch" in sys.argv else timed(lambda: [torch.matmul(a16, b.T) for b in b16])
        t = sum(flops) / ms_both / 1e9
        tc, t2 = (sum(flops) / ms_cat / 1e9, sum(flops) / ms_two / 1e9) if ms_cat else (t, t)
        print(
            f"beside wq_a+wkv  m={m:<5} wq_a {ms_a:.4f} ms  wkv {ms_kv:.4f} ms  together {ms_both:.4f} ms  {t:7.1f} TFLOP/s  "
            f"torch bf16 [1536, 4096] {tc:7.1f}  two matmuls {t2:7.1f}  ours/bf16 {t / tc:5.2f}  y {shas[0]} {shas[1]}",
            flush=True,
        )


def main():
    cubins = sys.argv[1]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else [""]
    ms_list = [int(v) for v in sys.argv[sys.argv.index("--m") + 1].split(",")] if "--m" in sys.argv else [1, 64, 512, 2048]
    torch.cuda.init()
    torch.manual_seed(0)
    torch.zeros(1, device="cuda")
    fp8 = load(f"{cubins}/fp8_gemm.cubin", ["fp8_gemm_quant", "fp8_gemm", "fp8_gemm_rows"], ["fp8_gemm_rows8", "fp8_gemm_rows_long", "fp8_gemm_rows_cl"])
    fp4 = load(f"{cubins}/mxfp4_gemm.cubin", ["mxfp4_gemm_quant", "mxfp4_gemm", "mxfp4_gemm_rows", "mxfp4_gemm_slots"], ["mxfp4_gemm_rows8"])
    dq = load(f"{cubins}/dequant_gemm.cubin", ["dequant_gemm_rows"])
    bf = load(f"{cubins}/bf16_gemm.cubin", ["bf16_gemm", "bf16_gemm_rows"])
    shapes = [
        ("fp8 wq_a", "fp8", 1024, 4096),
        ("fp8 wq_b", "fp8", 32768, 1024),
        ("fp8 wkv", "fp8", 512, 4096),
        ("fp8 wo_b", "fp8", 4096, 8192),
        ("fp8 shared w1", "fp8", 2048, 4096),
        ("fp8 shared w2", "fp8", 4096, 2048),
        ("mxfp4 expert w1", "fp4", 2048, 4096),
        ("mxfp4 expert w2", "fp4", 4096, 2048),
        ("slots w1+w3", "slots", 2048, 4096),
        ("slots w2", "slots", 4096, 2048),
        ("dequant wo_a", "dequant", 8192, 4096),
        ("bf16 head", "bf16", 129280, 4096),
    ]
    if "--shapes" in sys.argv:
        shapes = [(f"{a} [{c}, {d}]", b, int(c), int(d)) for a, b, c, d in (t.split(":") for t in sys.argv[sys.argv.index("--shapes") + 1].split(","))]
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    copy_gbs = 2 * big.numel() / timed(lambda: torch.empty_like(big).copy_(big), reps=5, batch=2) / 1e6
    del big
    print(f"device copy {copy_gbs:.0f} GB/s (bytes read plus written)", flush=True)
    if os.environ.get("TF_DUMP_Y"):
        print(f"SM clock by a 20M-cycle sleep: {20e6 / timed(lambda: torch.cuda._sleep(20_000_000), reps=3, batch=1) / 1e3:.0f} MHz", flush=True)
    if "--beside" in sys.argv:
        beside(fp8, ms_list)
        return
    rows = []
    for name, kind, n, k in [sh for sh in shapes if any(o in sh[0] for o in only)]:
        for m in ms_list:
            if (kind == "bf16" and m > 512) or (kind == "dequant" and m > 16) or (kind == "slots" and m > 1):
                continue
            x = torch.randn(m, k, device="cuda") * 2
            y = torch.empty(m, n, device="cuda")
            kp = (k + 7) // 8 * 8
            q16 = torch.zeros(m, kp, dtype=torch.int16, device="cuda")
            qs = torch.empty(m, (k + 127) // 128, device="cuda")
            # Up to 16 rows take a `_rows` entry in 16-column tiles.
            suffix = "_rows" if m <= 16 and kind != "bf16" else ""
            # Up to 8 rows take `_rows8` where the cubin has it (three blocks an SM), as the host functions do.
            has8 = f"{'fp8' if kind == 'fp8' else 'mxfp4'}_gemm_rows8" in (fp8 if kind == "fp8" else fp4)
            if m <= 8 and kind in ("fp8", "fp4") and has8 and "--no-rows8" not in sys.argv:
                suffix = "_rows8"
            tiles = (n + 15) // 16 if suffix else ((n + 127) // 128) * ((m + 63) // 64)
            grid = min(rows_blocks(tiles, 1, 3 if suffix == "_rows8" else 2) if suffix else tiles, 65535)
            # The sm_90a prompt entries run one block an SM over the tiles, as Gpu::config launches them.
            if not suffix and pipe_threads() == 384 and not os.environ.get("TF_PIPE_ALL_TILES"):
                grid = min(grid, torch.cuda.get_device_properties(0).multi_processor_count)
            # Up to 8 FP8 rows with K >= 4096 take `_rows_long` where the cubin has it (as fp8_gemm/cuda.rs), one block a tile.
            if kind == "fp8" and suffix == "_rows8" and k >= 4096 and "fp8_gemm_rows_long" in fp8 and "--rows-grid" in sys.argv:
                suffix, grid = "_rows_long", min(tiles, 65535)
            if kind == "fp8" and m <= 8 and "fp8_gemm_rows_long" in fp8 and "--long" in sys.argv:
                suffix, grid = "_rows_long", min(tiles, 65535)
            if kind == "fp8" and m <= 4 and k >= 4096 and "fp8_gemm_rows_cl" in fp8 and "--cl" in sys.argv:
                suffix, grid = "_rows_cl", 4 * min(tiles, 16383)
            if kind == "fp8":
                w = e4m3_codes(n * k)
                s = torch.full((((n + 127) // 128) * ((k + 127) // 128),), 120, dtype=torch.uint8, device="cuda")
                launch(fp8["fp8_gemm_quant"], min(m, 65535), 256, [x, q16, qs, m, k])
                ws = copies(w)
                run = lambda w=w: launch(fp8["fp8_gemm" + suffix], grid, 256 if suffix else pipe_threads(), [q16, qs, w, s, y, m, n, k], 0 if suffix else pipe_smem())
                run()
                q = q16.view(torch.float16)[:, :k].float()
                wd = w.view(torch.float8_e4m3fn).float().view(n, k) * 2.0**-7
                ref = (q.double() * qs.double().repeat_interleave(128, 1)[:, :k]) @ wd.double().T
            elif kind == "fp4":
                w = torch.randint(0, 256, (n * k // 2,), dtype=torch.uint8, device="cuda")
                s = torch.randint(118, 126, (n * k // 32,), dtype=torch.uint8, device="cuda")
                launch(fp4["mxfp4_gemm_quant"], min(m, 65535), 256, [x, q16, qs, m, k])
                ws = copies(w)
                run = lambda w=w: launch(fp4["mxfp4_gemm" + suffix], grid, 256 if suffix else pipe_threads(), [q16, qs, w, s, y, m, n, k], 0 if suffix else pipe_smem())
                run()
                q = q16.view(torch.float16)[:, :k].float()
                grid_v = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], device="cuda")
                nib = torch.stack([w & 15, w >> 4], 1).view(n, k).long()
                wd = grid_v[nib].double() * torch.pow(2.0, s.double() - 127).view(n, k // 32).repeat_interleave(32, 1)
                ref = (q.double() * qs.double().repeat_interleave(128, 1)[:, :k]) @ wd.T
            elif kind == "slots":
                # 6 routed experts of 256 (one quantised row each), w1/w3 as two tables in one launch, w2 alone.
                z = 2 if "w3" in name else 1
                slots, experts = 6, 256
                xs = torch.randn(slots, k, device="cuda") * 2
                q16 = torch.zeros(slots, kp, dtype=torch.int16, device="cuda")
                qs = torch.empty(slots, (k + 127) // 128, device="cuda")
                launch(fp4["mxfp4_gemm_quant"], slots, 256, [xs, q16, qs, slots, k])
                mats = [[torch.randint(0, 256, (n * k // 2,), dtype=torch.uint8, device="cuda") for _ in range(slots)] for _ in range(z)]
                scs = [[torch.randint(118, 126, (n * k // 32,), dtype=torch.uint8, device="cuda") for _ in range(slots)] for _ in range(z)]
                tables = []
                for zz in range(z):
                    t = torch.zeros(2 * experts, dtype=torch.int64)
                    for e in range(slots):
                        t[2 * (40 * e + 3)], t[2 * (40 * e + 3) + 1] = mats[zz][e].data_ptr(), scs[zz][e].data_ptr()
                    tables.append(t.cuda())
                idx = torch.tensor([40 * e + 3 for e in range(slots)], dtype=torch.int32, device="cuda")
                ys = [torch.empty(slots, n, device="cuda") for _ in range(z)]
                w = torch.cat([torch.cat(mm) for mm in mats])
                ws = [w]

                def run(w=None):
                    f, args = fp4["mxfp4_gemm_slots"], [q16, qs, tables[0], tables[-1], idx, 1, ys[0], ys[-1], n, k, experts]
                    vals = [ctypes.c_uint64(a.data_ptr()) if isinstance(a, torch.Tensor) else ctypes.c_int32(a) for a in args]
                    ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
                    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
                    if "--slots-warps" in sys.argv:
                        sw = int(sys.argv[sys.argv.index("--slots-warps") + 1])
                        grid, block = -(-((n + 15) // 16) // sw), 32 * sw
                    else:
                        grid, block = rows_blocks((n + 15) // 16, slots * z, 3 if "mxfp4_gemm_rows8" in fp4 else 2), 256
                    check(CU.cuLaunchKernel(f, grid, slots, z, block, 1, 1, 0, stream, ptrs, None), "cuLaunchKernel")

                run()
                torch.cuda.synchronize()
                y = torch.cat(ys)
                ref = y.double()
            elif kind == "dequant":
                groups = 8
                w = e4m3_codes(n * k)
                s = torch.full((((n + 127) // 128) * ((k + 127) // 128),), 120, dtype=torch.uint8, device="cuda")
                xg = torch.randn(m, groups * k, device="cuda")
                ws = copies(w)
                run = lambda w=w: launch(dq["dequant_gemm_rows"], (n + 7) // 8, 256, [xg, w, s, y, m, n // groups, k, groups, n, 0])
                run()
                wd = w.view(torch.float8_e4m3fn).float().view(groups, n // groups, k) * 2.0**-7
                ref = torch.einsum("mgk,gnk->mgn", xg.double().view(m, groups, k), wd.double()).reshape(m, n)
            else:
                w = (torch.randn(n, k, device="cuda") * 0.03).to(torch.bfloat16)
                ws = copies(w)
                if m <= 16:
                    # Decode: a warp per 16-column tile, eight to a block, stages unsplit (the head's launcher at this width).
                    parts = torch.empty(1, device="cuda")
                    run = lambda w=w: launch(bf["bf16_gemm_rows"], (n + 127) // 128, 256, [x, w, parts, y, m, n, k, 0])
                else:
                    run = lambda w=w: launch(bf["bf16_gemm"], grid, 256, [x, w, y, m, n, k])
                run()
                ref = x.double() @ w.double().T
            torch.cuda.synchronize()
            rel = ((y.double() - ref).norm() / ref.norm()).item()
            y_sha = hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest()[:16]
            if os.environ.get("TF_DUMP_Y"):
                print(name, "y ints", y.view(-1)[:14].view(torch.int32).tolist(), flush=True)
            ms = timed(run)
            turn = iter(range(1 << 30))
            ms_rot = timed(lambda: run(ws[next(turn) % len(ws)]))
            flops = 2.0 * m * n * k
            a16, b16 = x.to(torch.bfloat16), torch.randn(n, k, device="cuda").to(torch.bfloat16)
            ms_bf16 = ms if "--no-torch" in sys.argv else timed(lambda: torch.matmul(a16, b16.T))
            ms_fp8 = None
            if m % 16 == 0 and "--no-torch" not in sys.argv and hasattr(torch, "_scaled_mm"):
                a8, b8 = a16.to(torch.float8_e4m3fn), b16.to(torch.float8_e4m3fn)
                one = torch.ones((), device="cuda")
                try:
                    ms_fp8 = timed(lambda: torch._scaled_mm(a8, b8.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                except Exception as e:  # noqa: BLE001
                    print(f"_scaled_mm unavailable: {e}")
            row = {
                "name": name, "m": m, "n": n, "k": k, "ms": ms, "tflops": flops / ms / 1e9, "rel_norm_vs_f64": rel, "y_sha": y_sha,
                "weight_gbs": w.numel() * w.element_size() / ms / 1e6, "ms_rot": ms_rot,
                "weight_gbs_rot": w.numel() * w.element_size() / ms_rot / 1e6,
                "torch_bf16_tflops": flops / ms_bf16 / 1e9, "torch_fp8_tflops": flops / ms_fp8 / 1e9 if ms_fp8 else None,
            }
            rows.append(row)
            print(
                f"{name:<16} m={m:<5} [{n}, {k}]  {ms:8.3f} ms  {row['tflops']:7.1f} TFLOP/s  "
                f"torch bf16 {row['torch_bf16_tflops']:7.1f}  fp8 {row['torch_fp8_tflops'] or 0:7.1f}  "
                f"ours/bf16 {row['tflops'] / row['torch_bf16_tflops']:5.2f}  weights {row['weight_gbs']:6.0f} GB/s  rot {row['weight_gbs_rot']:6.0f}  rel-norm {rel:.2e}  y {y_sha}",
                flush=True,
            )
    if out_json:
        json.dump({"device": torch.cuda.get_device_name(), "copy_gbs": copy_gbs, "rows": rows}, open(out_json, "w"), indent=1)


if __name__ == "__main__":
    main()
