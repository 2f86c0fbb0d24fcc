"""Goldens for the group-D kernels (compress, sparse_attn) from transformers' DeepSeek V4 modules; see dsv4_attention/README.md."""

import pathlib

import numpy as np
import torch
from transformers import DeepseekV4Config
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

OUT = pathlib.Path(__file__).with_suffix("")
GEN = torch.Generator().manual_seed(0)
HD = 16  # compressor head_dim in these goldens


def hexes(t):
    bits = t.detach().float().contiguous().view(torch.int32).numpy().view(np.uint32).ravel()
    return " ".join(f"{b:08x}" for b in bits)


def write(name, header, sections):
    OUT.mkdir(exist_ok=True)
    body = "".join(f"# {h}\n" for h in header)
    body += "".join(f"{key} {hexes(value)}\n" for key, value in sections)
    (OUT / name).write_text(body)


def config():
    return DeepseekV4Config(
        hidden_size=4 * HD, num_hidden_layers=2, num_attention_heads=4, head_dim=HD, qk_rope_head_dim=8,
        q_lora_rank=32, o_lora_rank=16, o_groups=2, index_n_heads=2, index_head_dim=HD, index_topk=4,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, vocab_size=64,
    )


def pooled(compressor, kv, gate, width):
    """The compressor's gated pooling alone: projections select kv / gate from x, norm and RoPE are identities."""
    hidden = torch.cat([kv, gate], dim=-1)[None]  # [1, T, 2 * width]
    eye, zero = torch.eye(width), torch.zeros(width, width)
    with torch.no_grad():
        compressor.kv_proj.weight.copy_(torch.cat([eye, zero], dim=1))
        compressor.gate_proj.weight.copy_(torch.cat([zero, eye], dim=1))
    compressor.kv_norm = torch.nn.Identity()
    rope = v4.apply_rotary_pos_emb
    v4.apply_rotary_pos_emb = lambda x, cos, sin, *a, **k: x
    try:
        with torch.no_grad():
            positions = torch.arange(kv.shape[0])[None]
            q_residual = torch.zeros(1, kv.shape[0], 32)
            out = compressor(hidden, q_residual, positions, None, 0)[0]
    finally:
        v4.apply_rotary_pos_emb = rope
    return out.reshape(-1, HD)


def csa():
    cfg = config()
    cfg.hidden_size = 4 * HD
    c = v4.DeepseekV4CSACompressor(cfg).float()
    tokens = 12
    kv = torch.randn(tokens, 2 * HD, generator=GEN) * 2
    gate = torch.randn(tokens, 2 * HD, generator=GEN) * 3
    ape = torch.randn(4, 2 * HD, generator=GEN) * 0.5
    with torch.no_grad():
        c.position_bias.copy_(ape)
    out = pooled(c, kv, gate, 2 * HD)
    write("compress_csa.txt", [f"DeepseekV4CSACompressor pooling, ratio 4, head_dim {HD}, {tokens} tokens; f32 bits",
                               "kv/gate [tokens, 2*head_dim], ape [4, 2*head_dim], entries [tokens/4, head_dim]"],
          [("kv", kv), ("gate", gate), ("ape", ape), ("entries", out)])


def hca():
    cfg = config()
    cfg.hidden_size = 2 * HD
    c = v4.DeepseekV4HCACompressor(cfg).float()
    tokens = 256
    kv = torch.randn(tokens, HD, generator=GEN) * 2
    gate = torch.randn(tokens, HD, generator=GEN) * 3
    ape = torch.randn(128, HD, generator=GEN) * 0.5
    with torch.no_grad():
        c.position_bias.copy_(ape)
    out = pooled(c, kv, gate, HD)
    write("compress_hca.txt", [f"DeepseekV4HCACompressor pooling, ratio 128, head_dim {HD}, {tokens} tokens; f32 bits",
                               "kv/gate [tokens, head_dim], ape [128, head_dim], entries [tokens/128, head_dim]"],
          [("kv", kv), ("gate", gate), ("ape", ape), ("entries", out)])


def attention():
    heads, hd, rows, entries, listed = 4, 32, 3, 20, 9
    q = torch.randn(rows, heads, hd, generator=GEN) * 2
    kv = torch.randn(entries, hd, generator=GEN)
    sinks = torch.randn(heads, generator=GEN) * 2
    idx = torch.full((rows, listed), -1, dtype=torch.int32)
    for r, n in enumerate([listed, 4, 1]):
        idx[r, :n] = torch.randperm(entries, generator=GEN)[:n].int()
    mask = torch.full((rows, entries), float("-inf"))
    for r in range(rows):
        for e in idx[r]:
            if e >= 0:
                mask[r, e] = 0.0
    module = torch.nn.Module()
    module.num_key_value_groups = heads
    module.sinks = torch.nn.Parameter(sinks)
    module.training = False
    with torch.no_grad():
        out, _ = v4.eager_attention_forward(module, q.transpose(0, 1)[None], kv[None, None], kv[None, None],
                                            mask[None, None], scaling=hd ** -0.5)
    write("sparse_attn.txt", [f"eager_attention_forward with sinks, f32, probabilities not rounded; {heads} heads x {hd}",
                              "q [rows, heads, hd], kv [entries, hd], sinks [heads], idx [rows, listed] (i32 bits, -1 none), o [rows, heads, hd]"],
          [("q", q), ("kv", kv), ("sinks", sinks), ("idx", idx.view(torch.float32)), ("o", out[0])])


if __name__ == "__main__":
    csa()
    hca()
    attention()
