"""Load a DeepSeek V4 checkpoint in the official layout into transformers' DeepseekV4ForCausalLM.

The FP8 (128x128 e8m0 block scales) and MXFP4 (e2m1 pairs, e8m0 per 32) weights are dequantized to f32,
which is exact, and handed to transformers with no quantization_config. MTP tensors are dropped because
transformers does not build the MTP layer.
"""

import json
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def read_tensors(ckpt: Path) -> dict:
    index = ckpt / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    tensors = {}
    for name in files:
        with safe_open(ckpt / name, framework="pt") as f:
            for key in f.keys():
                tensors[key] = f.get_tensor(key)
    return tensors


def dequant_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows, cols = q.shape
    s = scale.float().repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
    return q.float() * s


def dequant_fp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    b = packed.view(torch.uint8).long()
    codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(b.shape[0], -1)
    return E2M1[codes] * scale.float().repeat_interleave(32, 1)


def dequantize(tensors: dict) -> dict:
    out = {}
    for key, t in tensors.items():
        if key.startswith("mtp.") or key.endswith(".scale"):
            continue
        scale = tensors.get(key[: -len(".weight")] + ".scale") if key.endswith(".weight") else None
        if scale is not None and t.dtype == torch.float8_e4m3fn:
            out[key] = dequant_fp8(t, scale)
        elif scale is not None and t.dtype == torch.int8:
            out[key] = dequant_fp4(t, scale)
        elif t.is_floating_point():
            out[key] = t.float()
        else:
            out[key] = t
    return out


def load(ckpt: Path) -> tuple:
    """Returns (model in f32 eval mode, raw config dict, dequantized official-layout tensors)."""
    raw = json.loads((ckpt / "config.json").read_text())
    cfg = {k: v for k, v in raw.items() if k not in ("quantization_config", "architectures", "dtype", "expert_dtype")}
    tensors = dequantize(read_tensors(ckpt))
    with tempfile.TemporaryDirectory() as tmp:
        DeepseekV4Config(**cfg).save_pretrained(tmp)
        save_file({k: v.contiguous() for k, v in tensors.items()}, f"{tmp}/model.safetensors", metadata={"format": "pt"})
        model, info = DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.float32, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        raise SystemExit(f"transformers did not load every tensor: {problems}")
    return model.eval(), raw, tensors
