"""Float64 building blocks of the DeepSeek V4.1 reference, each written from MODELS-V41.md (and MODELS.md for V4 parts).

Checkpoint reading and exact dequantization, the fake-quant round trips of the KV caches and the indexer, RoPE with
YaRN, mHC mixing and the lagged collapse, Engram's token map, hash constants (as DeepSeek's Engram reference derives
them) and FP8 table lookup, and DSpark's Markov head.
"""

import json
import math
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from tokenizers import Regex, Tokenizer, normalizers

F = torch.float64
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=F)


# ---------------------------------------------------------------- checkpoint


def read_tensors(ckpt: Path) -> dict:
    index = ckpt / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    tensors = {}
    for name in files:
        with safe_open(ckpt / name, framework="pt") as f:
            for key in f.keys():
                tensors[key] = f.get_tensor(key)
    return tensors


class Weights:
    """Dequantized f64 views of a hub-layout V4.1 checkpoint (FP8 times e8m0 and FP4 times e8m0 are exact in f64)."""

    def __init__(self, ckpt: Path):
        self.raw = read_tensors(ckpt)
        self.cache = {}

    def __contains__(self, name: str) -> bool:
        return name in self.raw

    def __call__(self, name: str) -> torch.Tensor:
        if name not in self.cache:
            self.cache[name] = self._load(name)
        return self.cache[name]

    def _load(self, name: str) -> torch.Tensor:
        t = self.raw[name]
        scale = self.raw.get(name[: -len(".weight")] + ".scale") if name.endswith(".weight") else None
        if scale is not None and t.dtype == torch.float8_e4m3fn:
            rows, cols = t.shape
            br, bc = (1, 32) if ".engram.embed." in name else (32, 32)
            s = scale.float().to(F).repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
            return t.float().to(F) * s
        if scale is not None and t.dtype == torch.int8:
            b = t.view(torch.uint8).long()
            codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(b.shape[0], -1)
            return E2M1[codes] * scale.float().to(F).repeat_interleave(32, 1)
        return t.float().to(F)


# ---------------------------------------------------------------- number grids (exact in f64)


def round_grid(x: torch.Tensor, mant_bits: int, min_exp: int, maxval: float) -> torch.Tensor:
    """Round to nearest even on a float grid with `mant_bits` mantissa bits, subnormals below 2^min_exp, saturating."""
    a = x.abs()
    _, ex = torch.frexp(torch.where(a > 0, a, torch.ones_like(a)))
    e = torch.clamp(ex.to(F) - 1, min=min_exp)
    step = torch.exp2(e - mant_bits)
    q = torch.round(x / step) * step
    return q.clamp(-maxval, maxval)


def e4m3(x: torch.Tensor) -> torch.Tensor:
    return round_grid(x, 3, -6, 448.0)


def e2m1(x: torch.Tensor) -> torch.Tensor:
    return round_grid(x, 1, 0, 6.0)


def ceil_pow2(y: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2(y)), exactly, for positive y."""
    m, ex = torch.frexp(y)
    return torch.exp2(torch.where(m == 0.5, ex - 1, ex).to(F))


def blocks(x: torch.Tensor, size: int) -> torch.Tensor:
    return x.reshape(*x.shape[:-1], x.shape[-1] // size, size)


def fp8_round_trip(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """act_quant: per block s = 2^ceil(log2(max(amax, 1e-4) / 448)), e4m3(x / s) * s."""
    b = blocks(x, block)
    s = ceil_pow2(b.abs().amax(-1, keepdim=True).clamp_min(1e-4) / 448.0)
    return (e4m3(b / s) * s).reshape(x.shape)


def fp4_round_trip_e8m0(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """MXFP4 round trip: per block s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), e2m1(clamp(x / s)) * s."""
    b = blocks(x, block)
    s = ceil_pow2(b.abs().amax(-1, keepdim=True).clamp_min(6 * 2.0**-126) / 6.0)
    return (e2m1(b / s) * s).reshape(x.shape)


def fp4_round_trip_e4m3(x: torch.Tensor, block: int = 16) -> torch.Tensor:
    """NVFP4-like round trip: per block s = e4m3(amax / 6), e2m1(clamp(x / s)) * s; a zero scale gives zeros."""
    b = blocks(x, block)
    s = e4m3(b.abs().amax(-1, keepdim=True) / 6.0)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.where(s > 0, e2m1(b / safe) * s, torch.zeros_like(b))
    return q.reshape(x.shape)


# ---------------------------------------------------------------- small ops


def rms_norm(x: torch.Tensor, w, eps: float) -> torch.Tensor:
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def inv_freqs(rope_dim: int, theta: float, yarn) -> torch.Tensor:
    """DeepSeek's frequencies; with YaRN, the ramp between beta_fast and beta_slow correction dims."""
    dim = float(rope_dim)
    base = torch.tensor([theta ** (-(2 * i) / dim) for i in range(rope_dim // 2)], dtype=F)
    if yarn is None:
        return base
    corr = lambda rot: dim * math.log(yarn["original_max_position_embeddings"] / (rot * 2 * math.pi)) / (2 * math.log(theta))
    low = max(math.floor(corr(yarn["beta_fast"])), 0.0)
    high = min(math.ceil(corr(yarn["beta_slow"])), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(rope_dim // 2, dtype=F) - low) / (high - low)).clamp(0, 1)
    smooth = 1 - ramp
    return base / yarn["factor"] * (1 - smooth) + base * smooth


def rope(x: torch.Tensor, pos: torch.Tensor, freqs: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotates interleaved pairs of the last 2 * len(freqs) dims of x [..., T?, dim] by pos * freqs; pos broadcasts on dim -2."""
    r = 2 * freqs.numel()
    ang = pos.to(F)[:, None] * freqs[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    if inverse:
        sin = -sin
    head, tail = x[..., :-r], x[..., -r:]
    x0, x1 = tail[..., 0::2], tail[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x1 * cos + x0 * sin
    return torch.cat([head, torch.stack([y0, y1], dim=-1).reshape(tail.shape)], dim=-1)


def hc_mixes(X: torch.Tensor, fn, base, scale, hc_eps: float, norm_eps: float, iters: int):
    """V4's mHC mixing of streams X [T, hc, D]: (pre [T, hc], post [T, hc], comb [T, hc, hc])."""
    T, hc, _ = X.shape
    x = X.reshape(T, -1)
    mix = (x @ fn.T) * torch.rsqrt((x * x).mean(-1, keepdim=True) + norm_eps)
    pre = torch.sigmoid(mix[:, :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2 * torch.sigmoid(mix[:, hc : 2 * hc] * scale[1] + base[hc : 2 * hc])
    c = (mix[:, 2 * hc :] * scale[2] + base[2 * hc :]).reshape(T, hc, hc)
    c = torch.softmax(c, dim=-1) + hc_eps
    c = c / (c.sum(1, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        c = c / (c.sum(2, keepdim=True) + hc_eps)
        c = c / (c.sum(1, keepdim=True) + hc_eps)
    return pre, post, c


def lagged_collapse(X: torch.Tensor, pi: torch.Tensor) -> torch.Tensor:
    """sum_i pi_i X_i of streams X [T, hc, D] with the previous sublayer's pre-mix pi [T, hc] (one-hot on stream 0 at layer 0)."""
    return (pi[:, :, None] * X).sum(1)


# ---------------------------------------------------------------- DSpark


def markov_logits(logits: torch.Tensor, prev, embed: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """logits_i + H_m E_m[prev_i]: the Markov embedding of each draft's previous token through the Markov head [vocab, rank]."""
    return logits + embed[torch.as_tensor(prev)] @ head.T


# ---------------------------------------------------------------- Engram constants


def token_map(tokenizer_file: Path):
    """Tokenizer id -> compressed id: NFKC, NFD, strip accents, lowercase, collapse whitespace, strip (lone space kept)."""
    tok = Tokenizer.from_file(str(tokenizer_file))
    sentinel = "\ue000"
    norm = normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), sentinel),
        normalizers.Strip(), normalizers.Replace(sentinel, " "),
    ])
    key_to_new, lookup = {}, []
    for tid in range(tok.get_vocab_size(with_added_tokens=True)):
        text = tok.decode([tid], skip_special_tokens=False)
        if "\ufffd" in text:
            key = tok.id_to_token(tid)
        else:
            key = norm.normalize_str(text) or text
        lookup.append(key_to_new.setdefault(key, len(key_to_new)))
    return np.array(lookup, dtype=np.int64), len(key_to_new)


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


def engram_tables(layer_ids, vocab_per_ngram, n_heads, compressed_vocab):
    """Per layer: (multipliers [max_ngram], primes [(max_ngram-1) * n_heads], offsets), seen primes shared across layers."""
    seen, out = set(), {}
    half_bound = max(1, (np.iinfo(np.int64).max // compressed_vocab) // 2)
    for layer in layer_ids:
        rng = np.random.default_rng(10007 * layer)
        mult = rng.integers(0, half_bound, size=(len(vocab_per_ngram) + 1,), dtype=np.int64) * 2 + 1
        primes = []
        for vocab in vocab_per_ngram:
            cand = vocab - 1
            for _ in range(n_heads):
                cand += 1
                while not is_prime(cand) or cand in seen:
                    cand += 1
                seen.add(cand)
                primes.append(cand)
        offsets = np.concatenate([[0], np.cumsum(primes)[:-1]]).astype(np.int64)
        out[layer] = (mult, np.array(primes, dtype=np.int64), offsets)
    return out


def engram_lookup(codes: torch.Tensor, scales: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
    """Table rows [T, heads] of the F8_E4M3 `engram.embed` [N, dim] times its e8m0 scale per 32 columns -> [T, heads * dim]."""
    r = torch.from_numpy(rows)
    s = scales[r].float().to(F).repeat_interleave(32, -1)
    return (codes[r].float().to(F) * s).reshape(r.shape[0], -1)


def engram_rows(compressed_ids: np.ndarray, tables, pad: int, n_heads: int) -> np.ndarray:
    """Row ids [T, (max_ngram-1) * n_heads]: xor of token * multiplier over look-backs, mod each head's prime, plus offset."""
    mult, primes, offsets = tables
    T = len(compressed_ids)
    shifted = [np.concatenate([np.full(s, pad, dtype=np.int64), compressed_ids[: T - s]]) for s in range(len(mult))]
    mix = shifted[0] * mult[0]
    rows = []
    for n in range(1, len(mult)):
        mix = np.bitwise_xor(mix, shifted[n] * mult[n])
        for h in range(n_heads):
            head = (n - 1) * n_heads + h
            rows.append(mix % primes[head] + offsets[head])
    return np.stack(rows, axis=1)
