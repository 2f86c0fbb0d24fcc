"""The official DeepSeek V4 hub layout: tensor names, number formats, quantisation and the inverse mapping.

FP8 weights: e4m3 with one e8m0 scale per 128x128 block, s = 2^ceil(log2(max(amax, 1e-4) / 448)).
MXFP4 experts: e2m1 codes two per int8 byte (element 2k in the low nibble) with one e8m0 scale per 32 along the
input dimension, s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), ties to the even code (crates/formats/src/mxfp4.rs).
"""

import torch
from safetensors.torch import save_file
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
# Upper bound of each magnitude code's interval; a value on a bound goes to the even code (0.25 -> 0, 0.75 -> 2).
E2M1_BOUNDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
E2M1_BOUND_TO_LOWER = torch.tensor([True, False, True, False, True, False, True])
FP8_MAX, FP4_MAX = 448.0, 6.0
FP8_AMAX_FLOOR, FP4_AMAX_FLOOR = 1e-4, 6.0 * 2.0**-126


def ceil_log2(x: torch.Tensor) -> torch.Tensor:
    """Exact ceil(log2(x)) for positive normal f32."""
    mantissa, exponent = torch.frexp(x)
    return torch.where(mantissa == 0.5, exponent - 1, exponent)


def e8m0(exponent: torch.Tensor) -> torch.Tensor:
    return (exponent + 127).clamp(0, 254).to(torch.uint8).view(torch.float8_e8m0fnu)


def pow2(exponent: torch.Tensor) -> torch.Tensor:
    return torch.ldexp(torch.ones_like(exponent, dtype=torch.float32), exponent)


def fp8_blocks(w: torch.Tensor) -> tuple:
    """[rows, cols] -> (e4m3 codes, block exponents [ceil(rows/128), ceil(cols/128)])."""
    rows, cols = w.shape
    gr, gc = -(-rows // 128), -(-cols // 128)
    padded = torch.zeros(gr * 128, gc * 128, dtype=torch.float32, device=w.device)
    padded[:rows, :cols] = w.float()
    blocks = padded.view(gr, 128, gc, 128)
    exp = ceil_log2(blocks.abs().amax(dim=(1, 3)).clamp_min(FP8_AMAX_FLOOR) / FP8_MAX)  # [gr, gc]
    q = (blocks / pow2(exp)[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(gr * 128, gc * 128)[:rows, :cols].contiguous(), exp


def quant_fp8(w: torch.Tensor) -> tuple:
    """[rows, cols] f32 -> (e4m3 codes, e8m0 scales [ceil(rows/128), ceil(cols/128)])."""
    q, exp = fp8_blocks(w)
    return q, e8m0(exp)


def dequant_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows, cols = q.shape
    s = scale.float().repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
    return q.float() * s


def e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """Nearest e2m1 code of x (already scaled into [-6, 6]); ties to the even code, sign kept for zero."""
    a = x.abs()
    bounds, lower = E2M1_BOUNDS.to(x.device), E2M1_BOUND_TO_LOWER.to(x.device)
    code = torch.zeros_like(a, dtype=torch.uint8)
    for k in range(7):
        code += torch.where(lower[k], a > bounds[k], a >= bounds[k]).to(torch.uint8)
    return code | (torch.signbit(x).to(torch.uint8) << 3)


def fp4_blocks(w: torch.Tensor) -> tuple:
    """[..., in] -> (e2m1 codes [..., in], block exponents [..., in/32])."""
    blocks = w.float().reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    exp = ceil_log2(blocks.abs().amax(-1).clamp_min(FP4_AMAX_FLOOR) / FP4_MAX)
    return e2m1_codes(blocks / pow2(exp).unsqueeze(-1)).reshape(w.shape), exp


def quant_fp4(w: torch.Tensor) -> tuple:
    """[out, in] f32 -> (int8 [out, in/2] packed codes, e8m0 scales [out, in/32])."""
    codes, exp = fp4_blocks(w)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).view(torch.int8)
    return packed.contiguous(), e8m0(exp)


def dequant_fp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    b = packed.view(torch.uint8).long()
    codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(b.shape[0], -1)
    return E2M1.to(packed.device)[codes] * scale.float().repeat_interleave(32, 1)


def fake_quant(w: torch.Tensor, kind: str) -> torch.Tensor:
    """The value a weight takes in the exported checkpoint (experts may be [E, out, in])."""
    if kind == "fp8":
        q, exp = fp8_blocks(w)
        s = pow2(exp).repeat_interleave(128, 0)[: w.shape[0]].repeat_interleave(128, 1)[:, : w.shape[1]]
        return q.float() * s
    if kind == "fp4":
        codes, exp = fp4_blocks(w)
        return E2M1.to(w.device)[codes.long()] * pow2(exp).repeat_interleave(32, -1)
    if kind == "bf16":
        return w.to(torch.bfloat16).float()
    return w


def block_entries(prefix: str, block: v4.DeepseekV4DecoderLayer, hash_layer: bool) -> list:
    """(official name, tensor view, format) for one decoder block's weights."""
    a, m = block.self_attn, block.mlp
    out = [
        (f"{prefix}.attn_norm.weight", block.input_layernorm.weight, "bf16"),
        (f"{prefix}.ffn_norm.weight", block.post_attention_layernorm.weight, "bf16"),
        (f"{prefix}.attn.attn_sink", a.sinks, "f32"),
        (f"{prefix}.attn.q_norm.weight", a.q_a_norm.weight, "bf16"),
        (f"{prefix}.attn.kv_norm.weight", a.kv_norm.weight, "bf16"),
        (f"{prefix}.attn.wq_a.weight", a.q_a_proj.weight, "fp8"),
        (f"{prefix}.attn.wq_b.weight", a.q_b_proj.weight, "fp8"),
        (f"{prefix}.attn.wkv.weight", a.kv_proj.weight, "fp8"),
        (f"{prefix}.attn.wo_a.weight", a.o_a_proj.weight, "fp8"),
        (f"{prefix}.attn.wo_b.weight", a.o_b_proj.weight, "fp8"),
        (f"{prefix}.ffn.gate.weight", m.gate.weight, "bf16"),
        (f"{prefix}.ffn.shared_experts.w1.weight", m.shared_experts.gate_proj.weight, "fp8"),
        (f"{prefix}.ffn.shared_experts.w2.weight", m.shared_experts.down_proj.weight, "fp8"),
        (f"{prefix}.ffn.shared_experts.w3.weight", m.shared_experts.up_proj.weight, "fp8"),
    ]
    for site in ("attn", "ffn"):
        hc = getattr(block, f"{site}_hc")
        out += [(f"{prefix}.hc_{site}_{n}", getattr(hc, n), "f32") for n in ("fn", "base", "scale")]
    out.append((f"{prefix}.ffn.gate.tid2eid", m.gate.tid2eid, "i64") if hash_layer
               else (f"{prefix}.ffn.gate.bias", m.gate.e_score_correction_bias, "f32"))
    inter = m.experts.gate_up_proj.shape[1] // 2
    for e in range(m.experts.num_experts):
        out += [(f"{prefix}.ffn.experts.{e}.w1.weight", m.experts.gate_up_proj[e, :inter], "fp4"),
                (f"{prefix}.ffn.experts.{e}.w2.weight", m.experts.down_proj[e], "fp4"),
                (f"{prefix}.ffn.experts.{e}.w3.weight", m.experts.gate_up_proj[e, inter:], "fp4")]
    comp = a.compressor
    if comp is not None:
        out += compressor_entries(f"{prefix}.attn.compressor", comp)
    if isinstance(comp, v4.DeepseekV4CSACompressor):
        idx = comp.indexer
        out += [(f"{prefix}.attn.indexer.wq_b.weight", idx.q_b_proj.weight, "fp8"),
                (f"{prefix}.attn.indexer.weights_proj.weight", idx.scorer.weights_proj.weight, "bf16")]
        out += compressor_entries(f"{prefix}.attn.indexer.compressor", idx)
    return out


def compressor_entries(prefix: str, comp) -> list:
    return [(f"{prefix}.wkv.weight", comp.kv_proj.weight, "bf16"),
            (f"{prefix}.wgate.weight", comp.gate_proj.weight, "bf16"),
            (f"{prefix}.ape", comp.position_bias, "f32"),
            (f"{prefix}.norm.weight", comp.kv_norm.weight, "bf16")]


def entries(model, mtp, cfg: dict) -> list:
    """Every tensor of the checkpoint: (official name, view of the training parameter or buffer, format)."""
    inner = model.model
    out = [("embed.weight", inner.embed_tokens.weight, "bf16"), ("head.weight", model.lm_head.weight, "bf16"),
           ("norm.weight", inner.norm.weight, "bf16"), ("hc_head_fn", inner.hc_head.hc_fn, "f32"),
           ("hc_head_base", inner.hc_head.hc_base, "f32"), ("hc_head_scale", inner.hc_head.hc_scale, "f32")]
    for i, layer in enumerate(inner.layers):
        out += block_entries(f"layers.{i}", layer, i < cfg["num_hash_layers"])
    out += block_entries("mtp.0", mtp.block, False)
    out += [("mtp.0.e_proj.weight", mtp.e_proj.weight, "fp8"), ("mtp.0.h_proj.weight", mtp.h_proj.weight, "fp8"),
            ("mtp.0.enorm.weight", mtp.enorm.weight, "bf16"), ("mtp.0.hnorm.weight", mtp.hnorm.weight, "bf16"),
            ("mtp.0.norm.weight", mtp.norm.weight, "bf16"), ("mtp.0.hc_head_fn", mtp.hc_head.hc_fn, "f32"),
            ("mtp.0.hc_head_base", mtp.hc_head.hc_base, "f32"), ("mtp.0.hc_head_scale", mtp.hc_head.hc_scale, "f32")]
    return out


def check_coverage(model, mtp, cfg: dict) -> None:
    """Every parameter and persistent buffer appears in the official layout exactly once (by storage)."""
    covered = {}
    for name, t, _ in entries(model, mtp, cfg):
        key = t.untyped_storage().data_ptr()
        covered[key] = covered.get(key, 0) + t.numel()
    for owner in (model, mtp):
        for name, t in [*owner.named_parameters(), *owner.named_buffers()]:
            if "inv_freq" in name:
                continue
            got = covered.get(t.untyped_storage().data_ptr(), 0)
            if got != t.numel():
                raise SystemExit(f"{name}: {got} of {t.numel()} elements in the official layout")


@torch.no_grad()
def export_tensors(model, mtp, cfg: dict) -> dict:
    out = {}
    for name, t, kind in entries(model, mtp, cfg):
        t = t.detach().cpu()
        if kind == "fp8":
            out[name], out[name[: -len(".weight")] + ".scale"] = quant_fp8(t.float())
        elif kind == "fp4":
            out[name], out[name[: -len(".weight")] + ".scale"] = quant_fp4(t.float())
        elif kind == "bf16":
            out[name] = t.to(torch.bfloat16)
        elif kind == "f32":
            out[name] = t.float()
        else:
            out[name] = t.to(torch.int64)
    return {k: v.contiguous() for k, v in out.items()}


def save(tensors: dict, path) -> None:
    save_file(tensors, str(path), metadata={"format": "pt"})


@torch.no_grad()
def load_into(model, mtp, cfg: dict, tensors: dict, prefix: str = "") -> None:
    """Copies dequantised official-layout tensors into the training modules (names starting with `prefix` only)."""
    for name, t, kind in entries(model, mtp, cfg):
        if not name.startswith(prefix):
            continue
        src = tensors[name]
        if kind == "fp8":
            src = dequant_fp8(src, tensors[name[: -len(".weight")] + ".scale"])
        elif kind == "fp4":
            src = dequant_fp4(src, tensors[name[: -len(".weight")] + ".scale"])
        t.copy_(src.to(t.dtype))


class QuantSwap:
    """Quantisation-aware training: forward and backward on exported values, the step on the f32 masters."""

    def __init__(self, model, mtp, cfg: dict):
        self.params = []
        seen = set()
        for _, t, kind in entries(model, mtp, cfg):
            base = t if t._base is None else t._base
            if kind in ("fp8", "fp4", "bf16") and id(base) not in seen:
                seen.add(id(base))
                self.params.append((base, kind))
        self.masters = None

    @torch.no_grad()
    def quantise(self) -> None:
        self.masters = [p.detach().clone() for p, _ in self.params]
        for p, kind in self.params:
            p.copy_(fake_quant(p, kind))

    @torch.no_grad()
    def restore(self) -> None:
        for (p, _), m in zip(self.params, self.masters):
            p.copy_(m)
        self.masters = None
