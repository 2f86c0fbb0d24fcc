"""Golden tables for crates/formats from PyTorch's own dtypes; see formats/README.md for the file layout and torch's behaviour."""

import ast
import pathlib

import numpy as np
import torch
import torch.testing._internal as torch_testing

OUT = pathlib.Path(__file__).with_suffix("")
GEN = torch.Generator().manual_seed(0)


def load_torch_fp4_reference():
    """Defines torch's FP4 helpers from common_quantized.py without its test-framework imports."""
    src = (pathlib.Path(torch_testing.__file__).parent / "common_quantized.py").read_text()
    funcs = {"_n_ones", "_f32_to_floatx_unpacked", "_floatx_unpacked_to_f32", "down_size", "pack_uint4",
             "_bfloat16_to_float4_e2m1fn_x2", "to_mxfp"}
    consts = {"EBITS_F32", "MBITS_F32", "F32_EXP_BIAS", "FP4_EBITS", "FP4_MBITS"}
    body = []
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.name in funcs:
            body.append(node)
        elif isinstance(node, ast.Assign):
            names = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if names & consts:
                body.append(node)
    ns = {"torch": torch, "Tensor": torch.Tensor}
    exec(compile(ast.Module(body=body, type_ignores=[]), "common_quantized.py", "exec"), ns)
    missing = (funcs | consts) - ns.keys()
    assert not missing, f"torch's common_quantized.py changed: {missing}"
    return ns


def f32_bits(t):
    return t.float().contiguous().view(torch.int32).numpy().view(np.uint32)


def from_bits(bits):
    return torch.from_numpy(np.asarray(bits, dtype=np.uint32).view(np.int32)).view(torch.float32)


def write(name, header, lines):
    path = OUT / name
    path.write_text("".join(f"# {h}\n" for h in header) + "".join(f"{l}\n" for l in lines))
    print(f"{path.relative_to(OUT.parent.parent.parent)}: {len(lines)} lines, {path.stat().st_size} bytes")


def write_decode(name, source, values):
    write(name, [f"{source}; line i is code i as f32 bits"], [f"{b:08x}" for b in f32_bits(values)])


def write_encode(name, source, x, codes, width):
    lines = [f"{i:08x} {c:0{width}x}" for i, c in zip(f32_bits(x), codes.tolist())]
    write(name, [f"{source}; input f32 bits, torch's code"], lines)


def randn(n, scales):
    return torch.cat([torch.randn(n, generator=GEN) * s for s in scales])


def neighbours(values):
    """Each value with the f32 one ulp below and above it (same sign)."""
    bits = f32_bits(values).astype(np.int64)
    return from_bits(np.concatenate([bits - 1, bits, bits + 1]) & 0xFFFFFFFF)


def with_negatives(x):
    return torch.cat([x, -x])


SPECIALS = from_bits([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                      0xFFFFFFFF, 0x7FA00000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x007FFFFF,
                      0x00800000, 0x00400000, 0x00600000, 0x00200000])


def pack_nibbles(codes):
    return codes[0::2] | (codes[1::2] << 4)


def main():
    OUT.mkdir(exist_ok=True)
    fp4 = load_torch_fp4_reference()

    codes8 = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    write_decode("e4m3_decode.txt", "torch uint8.view(float8_e4m3fn).float()", codes8.view(torch.float8_e4m3fn))
    write_decode("e8m0_decode.txt", "torch uint8.view(float8_e8m0fnu).float()", codes8.view(torch.float8_e8m0fnu))
    codes16 = torch.from_numpy(np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16))
    write_decode("bf16_decode.txt", "torch int16.view(bfloat16).float()", codes16.view(torch.bfloat16))

    nibbles = torch.arange(16, dtype=torch.uint8)
    e2m1 = fp4["_floatx_unpacked_to_f32"](nibbles, 2, 1)
    # The packed float4_e2m1fn_x2 of the decoded values must hold the codes, element 2k in the low nibble.
    packed = fp4["_bfloat16_to_float4_e2m1fn_x2"](e2m1.to(torch.bfloat16))
    assert packed.dtype == torch.float4_e2m1fn_x2
    assert torch.equal(packed.view(torch.uint8), pack_nibbles(nibbles))
    write_decode("e2m1_decode.txt", "torch common_quantized._floatx_unpacked_to_f32(codes, 2, 1)", e2m1)

    x = torch.cat([SPECIALS, with_negatives(randn(150, [1e-30, 1e-6, 1e-2, 1.0, 1e2, 1e6, 1e30])),
                   from_bits(torch.randint(0, 2**32, (300,), generator=GEN).numpy().astype(np.uint32))])
    bf = torch.randint(0, 0x7F80, (300,), generator=GEN).numpy().astype(np.uint32)
    ties = np.concatenate([bf << 16 | 0x8000, [0x7F7F8000, 0x7F7F7FFF, 0x3F808000, 0x3F818000]])
    x = torch.cat([x, with_negatives(neighbours(from_bits(ties)))])
    write_encode("bf16_encode.txt", "torch x.to(bfloat16)", x,
                 x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16), 4)

    grid = codes8[:0x7F].view(torch.float8_e4m3fn).float()
    mids = (grid[:-1] + grid[1:]) / 2
    edges = torch.tensor([2.0**-10, 2.0**-11, 2.0**-9, 3 * 2.0**-10, 2.0**-6, 448, 456, 464, 472, 480, 500, 1e6])
    x = torch.cat([SPECIALS, with_negatives(torch.cat([neighbours(mids), grid, neighbours(edges)])),
                   randn(300, [2.0**-10, 2.0**-6, 2.0**-3, 1, 8, 64, 150])])
    write_encode("e4m3_encode.txt", "torch x.clamp(-448, 448).to(float8_e4m3fn) (saturating)", x,
                 x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8), 2)

    pow2 = from_bits(np.arange(1, 255, dtype=np.uint32) << 23)
    sub = from_bits(np.array([1 << i for i in range(23)] + [3 << i for i in range(22)], dtype=np.uint32))
    x = torch.cat([SPECIALS, with_negatives(torch.cat([neighbours(pow2), neighbours(pow2 * 1.5), pow2 * 1.25,
                                                       pow2 * 1.75, neighbours(sub)])),
                   randn(200, [1e-30, 1e-3, 1, 1e3, 1e30])])
    write_encode("e8m0_encode.txt", "torch x.to(float8_e8m0fnu)", x,
                 x.to(torch.float8_e8m0fnu).view(torch.uint8), 2)

    grid = e2m1[:8]
    mids = (grid[:-1] + grid[1:]) / 2
    edges = torch.tensor([6.0, 7.0, 8.0, 1e30, float("inf"), 1e-45, 1e-30])
    x = torch.cat([with_negatives(torch.cat([neighbours(mids), grid, neighbours(edges)])),
                   randn(300, [0.25, 1, 2, 4])])
    x = x[~x.isnan()]
    write_encode("e2m1_encode.txt", "torch common_quantized._f32_to_floatx_unpacked(x, 2, 1); NaN left out", x,
                 fp4["_f32_to_floatx_unpacked"](x, 2, 1), 1)

    rows = [torch.randn(64, generator=GEN) * 2.0**e for e in (-20, -8, -3, 0, 0, 1, 4, 12, 20)]
    rows.append(torch.cat([grid, -grid, grid * 2, -grid / 4, grid * 0, grid * 1024, grid / 8, -grid * 3]))
    rows.append(torch.cat([mids, -mids, torch.tensor([6.0, -6.0])]).repeat(4))
    x = torch.stack(rows).to(torch.bfloat16).float()
    scales, packed = fp4["to_mxfp"](x, block_size=32, format="mxfp4")
    lines = [f"{' '.join(f'{b:08x}' for b in f32_bits(r))} | {bytes(p.tolist()).hex()} | {bytes(s.tolist()).hex()}"
             for r, p, s in zip(x, packed.view(torch.uint8), scales.view(torch.uint8))]
    write("mxfp4_quant.txt", ["torch common_quantized.to_mxfp(x, 32, 'mxfp4') on bf16-exact rows of 64",
                              "inputs as f32 bits | packed bytes (element 2k low nibble) | e8m0 scales"], lines)

    blocks = []
    for rows, cols, br, bc in [(70, 100, 32, 32), (32, 64, 32, 32), (5, 97, 1, 32), (64, 64, 128, 128)]:
        w = torch.randn(rows, cols, generator=GEN) * 2.0 ** torch.randint(-12, 12, (rows, cols), generator=GEN)
        w[0, 0] = 0.0
        if rows > 40:
            w[32:, :32] = 0.0
        gr, gc = -(-rows // br), -(-cols // bc)
        pad = torch.zeros(gr * br, gc * bc)
        pad[:rows, :cols] = w.abs()
        amax = pad.view(gr, br, gc, bc).amax(dim=(1, 3)).clamp_min(1e-4)
        scale = torch.pow(2.0, torch.ceil(torch.log2(amax / 448.0)))
        full = scale.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
        q = (w / full).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
        blocks += [f"{rows} {cols} {br} {bc}", " ".join(f"{b:08x}" for b in f32_bits(w.flatten())),
                   q.flatten().numpy().tobytes().hex(), scale.to(torch.float8_e8m0fnu).view(torch.uint8).flatten().numpy().tobytes().hex()]
    write("block_fp8_e8m0.txt", ["DeepSeek act_quant rule per block, s = 2^ceil(log2(max(amax, 1e-4) / 448)), codes (w / s).to(float8_e4m3fn)",
                                 "per weight: `rows cols block_rows block_cols`, then input f32 bits, codes hex, e8m0 scales hex"], blocks)


if __name__ == "__main__":
    main()
