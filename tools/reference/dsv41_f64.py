"""Float64 reference of the DeepSeek V4.1 forward pass (family dsv41), written from MODELS-V41.md; no transformers module exists.

Usage: tools/reference/run.sh dsv41_f64.py CKPT OUT   (CKPT from `tensorfold synth --family dsv41 --preset tiny --seed 0`)
Writes OUT/{short,long}.safetensors: input ids, Engram compressed ids and row ids, each index source's top-k, the
streams after each Engram step and every layer's output streams at chosen positions, top-64 logits there, the last
row's logits and a greedy continuation.

Arithmetic: every weight dequantized exactly; activations in f64 with no bf16 or act_quant rounding; the fake-quant
round trips the specification names are applied (window KV FP8 per 32, compressed KV FP4 with e4m3 scales per 16,
indexer queries and keys FP4 with ue8m0 scales per 32). The DSpark stages (mtp.*) are in dsv41_dspark_f64.py.
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

import dsv41_ops as ops

F = ops.F
SHORT = "The harbour was quiet at dawn, and the fishing boats rocked gently on the grey water."
LONG = (
    "In the old town by the river there was a clockmaker who repaired every kind of clock, from tall cases that "
    "stood in the halls of merchants to small brass watches carried by sailors. Each morning he opened his shutters, "
    "swept the step, and set out the day's work on a bench beneath the window. Children stopped to watch the wheels "
    "turn, and travellers asked him for the time although a dozen faces on the wall already told it."
)
GREEDY_TOKENS = 12
TOP = 64


class Model:
    def __init__(self, ckpt: Path):
        raw = json.loads((ckpt / "config.json").read_text())
        self.c = c = raw["text_config"]
        self.w = ops.Weights(ckpt)
        self.eps = c["rms_norm_eps"]
        self.rope_plain = ops.inv_freqs(c["qk_rope_head_dim"], c["rope_theta"], None)
        self.rope_yarn = ops.inv_freqs(c["qk_rope_head_dim"], c["compress_rope_theta"], c["rope_scaling"])
        self.map, n = ops.token_map(ckpt / "tokenizer.json")
        assert n == c["engram_compressed_vocab_size"], f"token map has {n} ids, config says {c['engram_compressed_vocab_size']}"
        self.tables = ops.engram_tables(c["engram_layer_ids"], c["engram_vocab_size"], c["engram_n_heads"], n)
        for layer, rows in zip(c["engram_layer_ids"], c["engram_num_embeddings"]):
            assert int(self.tables[layer][1].sum()) == rows, f"layer {layer}: primes do not sum to {rows}"

    # ------------------------------------------------------------ layer plan

    def ratio(self, l):
        return self.c["compress_ratios"][l]

    def latest(self, ids, l):
        below = [i for i in ids if i <= l]
        return max(below) if below else None

    def plan(self, l):
        c = self.c
        owners = [i for i in c["kv_source_layer_ids"] if i in c["index_source_layer_ids"]]
        compressed = self.ratio(l) != 0
        index_source = compressed and l in c["index_source_layer_ids"]
        return {
            "kv_source": self.latest(c["kv_source_layer_ids"], l) if compressed else None,
            "index_source": index_source,
            "key_owner": self.latest(owners, l) if index_source else None,
            "topk_from": self.latest(c["index_source_layer_ids"], l) if compressed else None,
            "candidate_masked": index_source and l > c["candidate_source_layer_id"],
        }

    def freqs(self, l):
        return self.rope_yarn if self.ratio(l) else self.rope_plain

    # ------------------------------------------------------------ sub-blocks

    def engram(self, l, X, rows):
        """X [T, hc, D] += gate * v, from 24 table rows per token."""
        p, c = f"layers.{l}.engram", self.c
        T, hc, D = X.shape
        emb = self.w(f"{p}.embed.weight")[torch.from_numpy(rows)].reshape(T, -1)
        kv = emb @ self.w(f"{p}.wkv.weight").T
        keys, v = kv[:, : hc * D].reshape(T, hc, D), kv[:, hc * D :]
        qw, kw = self.w(f"{p}.q_weight"), self.w(f"{p}.k_weight")
        rstd = lambda x: torch.rsqrt((x * x).mean(-1) + self.eps)
        d = (X * qw * kw * keys).sum(-1) * rstd(X) * rstd(keys) / D**0.5
        gate = torch.sigmoid(torch.sign(d) * torch.sqrt(d.abs().clamp_min(1e-6)))
        return X + gate[:, :, None] * v[:, None, :]

    def compress(self, l, u, pos):
        """Compressed entries of KV source l: (c before RoPE [N, hd], cache entries after RoPE and FP4 [N, hd])."""
        p, r = f"layers.{l}.attn.compressor", self.ratio(l)
        a = u @ self.w(f"{p}.wkv.weight").T
        if r == 2:
            g = u @ self.w(f"{p}.wgate.weight").T
            n = a.shape[0] // 2
            a2, g2 = a[: 2 * n].reshape(n, 2, -1), g[: 2 * n].reshape(n, 2, -1)
            a = (a2 * torch.softmax(g2, dim=1)).sum(1)
        cnorm = ops.rms_norm(a, self.w(f"{p}.norm.weight"), self.eps)
        entry_pos = torch.arange(cnorm.shape[0]) * r
        entries = ops.fp4_round_trip_e4m3(ops.rope(cnorm, entry_pos, self.rope_yarn))
        return cnorm, entries

    def index_scores(self, l, u, qr, pos, keys):
        """S [T, N] = sum_h relu(q_h . k_j) w_h; unreachable j (j >= (t+1) / ratio) are -inf."""
        p, c = f"layers.{l}.attn.indexer", self.c
        T, nh, ihd = u.shape[0], c["index_n_heads"], c["index_head_dim"]
        q = (qr @ self.w(f"{p}.wq_b.weight").T).reshape(T, nh, ihd)
        q = ops.fp4_round_trip_e8m0(ops.rope(q.transpose(0, 1), pos, self.rope_yarn).transpose(0, 1))
        w = (u @ self.w(f"{p}.weights_proj.weight").T) * ihd**-0.5 * nh**-0.5
        s = (torch.relu(torch.einsum("thd,nd->thn", q, keys)) * w[:, :, None]).sum(1)
        reach = (pos[:, None] + 1) // self.ratio(l)
        return torch.where(torch.arange(keys.shape[0])[None, :] < reach, s, torch.full_like(s, -torch.inf))

    def pool_mask(self, scores, pos, ratio):
        """Candidate pool per row: blocks scored by their max, the newest block always kept, top-K blocks; [T, N] bool."""
        c = self.c
        B, K = c["candidate_block_size"], c["candidate_topk_blocks"]
        T, N = scores.shape
        keep = torch.zeros(T, N, dtype=torch.bool)
        for t in range(T):
            n = int(pos[t] + 1) // ratio
            if n == 0:
                continue
            nb = (n + B - 1) // B
            best = [float(scores[t, b * B : min((b + 1) * B, n)].max()) for b in range(nb)]
            best[nb - 1] = float("inf")
            chosen = sorted(range(nb), key=lambda b: (-best[b], b))[:K]
            for b in chosen:
                keep[t, b * B : min((b + 1) * B, n)] = True
        return keep

    def topk(self, scores, pos, ratio):
        """Per row: min(index_topk, reachable) positions by score (ties: lowest position), ascending."""
        out = []
        for t in range(scores.shape[0]):
            n = int(pos[t] + 1) // ratio
            k = min(self.c["index_topk"], n)
            order = sorted(range(n), key=lambda j: (-float(scores[t, j]), j))[:k]
            out.append(sorted(order))
        return out

    def attention(self, l, u, pos, st):
        p, c = f"layers.{l}.attn", self.c
        T, H, hd = u.shape[0], c["num_attention_heads"], c["head_dim"]
        pl, fr = self.plan(l), self.freqs(l)
        qr = ops.rms_norm(u @ self.w(f"{p}.wq_a.weight").T, self.w(f"{p}.q_norm.weight"), self.eps)
        q = (qr @ self.w(f"{p}.wq_b.weight").T).reshape(T, H, hd)
        q = ops.rope(q.transpose(0, 1), pos, fr).transpose(0, 1)
        kv = ops.rms_norm(u @ self.w(f"{p}.wkv.weight").T, self.w(f"{p}.kv_norm.weight"), self.eps)
        kv = ops.fp8_round_trip(ops.rope(kv, pos, fr))
        if pl["kv_source"] == l:
            st["comp"][l] = self.compress(l, u, pos)
            if l in c["index_source_layer_ids"]:
                cnorm = st["comp"][l][0]
                k = ops.rms_norm(cnorm @ self.w(f"{p}.indexer.wk.weight").T, self.w(f"{p}.indexer.k_norm.weight"), self.eps)
                st["keys"][l] = ops.fp4_round_trip_e8m0(ops.rope(k, torch.arange(k.shape[0]) * self.ratio(l), self.rope_yarn))
        if pl["index_source"]:
            s = self.index_scores(l, u, qr, pos, st["keys"][pl["key_owner"]])
            if l == c["candidate_source_layer_id"]:
                st["pool"] = self.pool_mask(s, pos, self.ratio(l))
            if pl["candidate_masked"]:
                s = torch.where(st["pool"], s, torch.full_like(s, -torch.inf))
            st["topk"][l] = self.topk(s, pos, self.ratio(l))
        sink = self.w(f"{p}.attn_sink")
        o = torch.zeros(T, H, hd, dtype=F)
        W = c["sliding_window"]
        for t in range(T):
            keys = [kv[max(0, t - W + 1) : t + 1]]
            if pl["kv_source"] is not None:
                sel = st["topk"][pl["topk_from"]][t]
                keys.append(st["comp"][pl["kv_source"]][1][sel])
            K = torch.cat(keys)
            logits = q[t] @ K.T / hd**0.5
            m = torch.maximum(logits.max(-1).values, sink)
            e = torch.exp(logits - m[:, None])
            probs = e / (e.sum(-1) + torch.exp(sink - m))[:, None]
            o[t] = probs @ K
        o = ops.rope(o.transpose(0, 1), pos, fr, inverse=True).transpose(0, 1)
        g = c["o_groups"]
        wo_a = self.w(f"{p}.wo_a.weight").reshape(g, c["o_lora_rank"], -1)
        og = torch.einsum("tgk,gok->tgo", o.reshape(T, g, -1), wo_a).reshape(T, -1)
        return og @ self.w(f"{p}.wo_b.weight").T

    def moe(self, l, u):
        p, c = f"layers.{l}.ffn", self.c
        s = torch.sqrt(torch.nn.functional.softplus(u @ self.w(f"{p}.gate.weight").T))
        biased = s + self.w(f"{p}.gate.bias")
        lim = c["swiglu_limit"]

        def expert(prefix, x):
            h = torch.nn.functional.silu((x @ self.w(f"{prefix}.w1.weight").T).clamp(max=lim))
            return h * (x @ self.w(f"{prefix}.w3.weight").T).clamp(-lim, lim)

        out = torch.zeros_like(u)
        for t in range(u.shape[0]):
            idx = sorted(range(biased.shape[1]), key=lambda e: (-float(biased[t, e]), e))[: c["num_experts_per_tok"]]
            wts = s[t, idx] / (s[t, idx].sum() + 1e-20) * c["routed_scaling_factor"]
            for e, wt in zip(idx, wts):
                pe = f"{p}.experts.{e}"
                out[t] += (wt * expert(pe, u[t])) @ self.w(f"{pe}.w2.weight").T
        if c["n_shared_experts"]:
            out += expert(f"{p}.shared_experts", u) @ self.w(f"{p}.shared_experts.w2.weight").T
        return out

    def mixes(self, l, X, which):
        p, c = f"layers.{l}.hc_{which}", self.c
        return ops.hc_mixes(X, self.w(f"{p}_fn"), self.w(f"{p}_base"), self.w(f"{p}_scale"), c["hc_eps"], self.eps,
                            c["hc_sinkhorn_iters"])

    # ------------------------------------------------------------ whole pass

    def forward(self, ids: list):
        c = self.c
        T, hc = len(ids), c["hc_mult"]
        pos = torch.arange(T)
        compressed = self.map[np.array(ids)]
        pad = int(self.map[c["engram_pad_id"]])
        rows = {l: ops.engram_rows(compressed, self.tables[l], pad, c["engram_n_heads"]) for l in c["engram_layer_ids"]}
        X = self.w("embed.weight")[torch.tensor(ids)][:, None, :].repeat(1, hc, 1)
        pi = torch.zeros(T, hc, dtype=F)
        pi[:, 0] = 1.0
        st = {"comp": {}, "keys": {}, "topk": {}, "pool": None}
        layers, engram_out = [], {}
        for l in range(c["num_hidden_layers"]):
            if l in rows:
                X = self.engram(l, X, rows[l])
                engram_out[l] = X.clone()
            a_pi, a_post, a_comb = self.mixes(l, X, "attn")
            u = ops.rms_norm((pi[:, :, None] * X).sum(1), self.w(f"layers.{l}.attn_norm.weight"), self.eps)
            a = self.attention(l, u, pos, st)
            X = a_post[:, :, None] * a[:, None, :] + torch.einsum("tij,tid->tjd", a_comb, X)
            f_pi, f_post, f_comb = self.mixes(l, X, "ffn")
            u = ops.rms_norm((a_pi[:, :, None] * X).sum(1), self.w(f"layers.{l}.ffn_norm.weight"), self.eps)
            f = self.moe(l, u)
            X = f_post[:, :, None] * f[:, None, :] + torch.einsum("tij,tid->tjd", f_comb, X)
            pi = f_pi
            layers.append(X.clone())
        h = ops.rms_norm((pi[:, :, None] * X).sum(1), self.w("norm.weight"), self.eps)
        logits = h @ self.w("head.weight").T
        return logits, layers, compressed, rows, st["topk"], engram_out


def positions(n: int) -> list:
    picks = {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, n - 2, n - 1}
    return sorted(p for p in picks if 0 <= p < n)


def main() -> None:
    ckpt, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = Model(ckpt)
    tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    sha = hashlib.sha256((ckpt / "model.safetensors").read_bytes()).hexdigest()
    bos = model.c["bos_token_id"]
    for name, text in (("short", SHORT), ("long", LONG)):
        ids = [bos] + tok.encode(text, add_special_tokens=False).ids
        logits, layers, compressed, rows, topk, engram_out = model.forward(ids)
        pos = torch.tensor(positions(len(ids)))
        top = logits[pos].topk(TOP, dim=-1)
        greedy, seq = [], list(ids)
        for _ in range(GREEDY_TOKENS):
            nxt = int(model.forward(seq)[0][-1].argmax()) if greedy else int(logits[-1].argmax())
            greedy.append(nxt)
            seq.append(nxt)
        tensors = {
            "input_ids": torch.tensor(ids, dtype=torch.int32),
            "positions": pos.to(torch.int32),
            "compressed_ids": torch.from_numpy(compressed.astype(np.int32)),
            "logits_last": logits[-1].float().contiguous(),
            "top_ids": top.indices.to(torch.int32).contiguous(),
            "top_logits": top.values.contiguous(),
            "greedy": torch.tensor(greedy, dtype=torch.int32),
        }
        for l, r in rows.items():
            tensors[f"engram_rows.{l}"] = torch.from_numpy(r)
        k = model.c["index_topk"]
        for l, sel in topk.items():
            tensors[f"topk.{l}"] = torch.tensor([s + [-1] * (k - len(s)) for s in sel], dtype=torch.int32)
        for l, X in engram_out.items():
            tensors[f"engram_out.{l}"] = X[pos].float().contiguous()
        for i, X in enumerate(layers):
            tensors[f"layer.{i}"] = X[pos].float().contiguous()
        meta = {"checkpoint_sha256": sha, "torch": torch.__version__, "numpy": np.__version__, "text": text,
                "arithmetic": "float64", "stored": "layer streams and logits_last rounded to f32; top_logits f64"}
        save_file(tensors, str(out / f"{name}.safetensors"), metadata=meta)
        print(f"{name}: {len(ids)} tokens, greedy {greedy}")


if __name__ == "__main__":
    main()
