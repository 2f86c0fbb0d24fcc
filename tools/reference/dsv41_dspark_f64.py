"""Float64 reference of DSpark drafting (family dsv41, MODELS-V41.md "DSpark drafting"), on top of dsv41_f64.py's forward.

Usage: tools/reference/run.sh dsv41_dspark_f64.py CKPT OUT   (CKPT from `tensorfold synth --family dsv41 --preset tiny --seed 0`)
Writes OUT/dspark_{short,long}.safetensors: the prompt ids, y (the target's greedy token after the prompt), the five
greedy drafts of the block [y, noise x4], each draft row's logits with the Markov term, and the confidences.

Arithmetic as in dsv41_f64.py: weights dequantized exactly, activations in f64, the window KV FP8 round trip applied
to the rings and to the block's own KV.
"""

import hashlib
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

import dsv41_ops as ops
from dsv41_f64 import LONG, SHORT, Model

F = ops.F


class Dspark:
    def __init__(self, model: Model):
        self.m, self.c, self.w = model, model.c, model.w
        self.n = self.c["num_nextn_predict_layers"]

    def rings(self, layers, T):
        """Each stage's ring: kv_norm(wkv main_x) at the last sliding_window positions of the prompt, roped, FP8."""
        c, m = self.c, self.m
        for t in c["dspark_target_layer_ids"]:
            assert t not in c["engram_layer_ids"], "a target layer with Engram in front is not covered here"
        means = [layers[t - 1].mean(1) for t in c["dspark_target_layer_ids"]]
        hidden = torch.cat(means, dim=-1)
        main_x = ops.rms_norm(hidden @ self.w("mtp.0.main_proj.weight").T, self.w("mtp.0.main_norm.weight"), m.eps)
        first = max(0, T - c["sliding_window"])
        pos = torch.arange(first, T)
        out = []
        for s in range(self.n):
            p = f"mtp.{s}.attn"
            kv = ops.rms_norm(main_x[first:] @ self.w(f"{p}.wkv.weight").T, self.w(f"{p}.kv_norm.weight"), m.eps)
            out.append(ops.fp8_round_trip(ops.rope(kv, pos, m.rope_plain)))
        return out

    def attention(self, s, u, pos, ring):
        p, c, m = f"mtp.{s}.attn", self.c, self.m
        T, H, hd = u.shape[0], c["num_attention_heads"], c["head_dim"]
        fr = m.rope_plain
        qr = ops.rms_norm(u @ self.w(f"{p}.wq_a.weight").T, self.w(f"{p}.q_norm.weight"), m.eps)
        q = ops.rope(((qr @ self.w(f"{p}.wq_b.weight").T).reshape(T, H, hd)).transpose(0, 1), pos, fr).transpose(0, 1)
        kv = ops.rms_norm(u @ self.w(f"{p}.wkv.weight").T, self.w(f"{p}.kv_norm.weight"), m.eps)
        K = torch.cat([ring, ops.fp8_round_trip(ops.rope(kv, pos, fr))])
        sink = self.w(f"{p}.attn_sink")
        o = torch.zeros(T, H, hd, dtype=F)
        for t in range(T):
            logits = q[t] @ K.T / hd**0.5
            mx = torch.maximum(logits.max(-1).values, sink)
            e = torch.exp(logits - mx[:, None])
            o[t] = (e / (e.sum(-1) + torch.exp(sink - mx))[:, None]) @ K
        o = ops.rope(o.transpose(0, 1), pos, fr, inverse=True).transpose(0, 1)
        g = c["o_groups"]
        wo_a = self.w(f"{p}.wo_a.weight").reshape(g, c["o_lora_rank"], -1)
        og = torch.einsum("tgk,gok->tgo", o.reshape(T, g, -1), wo_a).reshape(T, -1)
        return og @ self.w(f"{p}.wo_b.weight").T

    def moe(self, s, u):
        p, c = f"mtp.{s}.ffn", self.c
        sc = torch.sqrt(torch.nn.functional.softplus(u @ self.w(f"{p}.gate.weight").T))
        biased = sc + self.w(f"{p}.gate.bias")
        lim = c["swiglu_limit"]

        def expert(prefix, x):
            h = torch.nn.functional.silu((x @ self.w(f"{prefix}.w1.weight").T).clamp(max=lim))
            return h * (x @ self.w(f"{prefix}.w3.weight").T).clamp(-lim, lim)

        out = torch.zeros_like(u)
        for t in range(u.shape[0]):
            idx = sorted(range(biased.shape[1]), key=lambda e: (-float(biased[t, e]), e))[: c["dspark_num_experts_per_tok"]]
            wts = sc[t, idx] / (sc[t, idx].sum() + 1e-20) * c["routed_scaling_factor"]
            for e, wt in zip(idx, wts):
                pe = f"{p}.experts.{e}"
                out[t] += (wt * expert(pe, u[t])) @ self.w(f"{pe}.w2.weight").T
        if c["n_shared_experts"]:
            out += expert(f"{p}.shared_experts", u) @ self.w(f"{p}.shared_experts.w2.weight").T
        return out

    def mixes(self, s, X, which):
        p, c = f"mtp.{s}.hc_{which}", self.c
        return ops.hc_mixes(X, self.w(f"{p}_fn"), self.w(f"{p}_base"), self.w(f"{p}_scale"), c["hc_eps"], self.m.eps,
                            c["hc_sinkhorn_iters"])

    def draft(self, ids, y):
        """Greedy drafts of the block [y, noise x4] after the prompt `ids`, their logits and confidences."""
        c, m = self.c, self.m
        _, layers, *_ = m.forward(ids)
        T, hc, size = len(ids), c["hc_mult"], c["dspark_block_size"]
        rings = self.rings(layers, T)
        block = [y] + [c["dspark_noise_token_id"]] * (size - 1)
        pos = torch.arange(T, T + size)
        X = self.w("embed.weight")[torch.tensor(block)][:, None, :].repeat(1, hc, 1)
        pi = torch.zeros(size, hc, dtype=F)
        pi[:, 0] = 1.0
        for s in range(self.n):
            a_pi, a_post, a_comb = self.mixes(s, X, "attn")
            u = ops.rms_norm(ops.lagged_collapse(X, pi), self.w(f"mtp.{s}.attn_norm.weight"), m.eps)
            a = self.attention(s, u, pos, rings[s])
            X = a_post[:, :, None] * a[:, None, :] + torch.einsum("tij,tid->tjd", a_comb, X)
            f_pi, f_post, f_comb = self.mixes(s, X, "ffn")
            u = ops.rms_norm(ops.lagged_collapse(X, a_pi), self.w(f"mtp.{s}.ffn_norm.weight"), m.eps)
            f = self.moe(s, u)
            X = f_post[:, :, None] * f[:, None, :] + torch.einsum("tij,tid->tjd", f_comb, X)
            pi = f_pi
        last = f"mtp.{self.n - 1}"
        h = ops.lagged_collapse(X, pi)
        base = ops.rms_norm(h, self.w(f"{last}.norm.weight"), m.eps) @ self.w("head.weight").T
        embed, head = self.w(f"{last}.markov_head.embed.weight"), self.w(f"{last}.markov_head.head.weight")
        proj = self.w(f"{last}.confidence_head.proj.weight")
        prev, drafts, rows, conf = y, [], [], []
        for i in range(size):
            row = ops.markov_logits(base[i : i + 1], [prev], embed, head)[0]
            conf.append(torch.sigmoid(torch.cat([h[i], embed[prev]]) @ proj[0]))
            prev = int(row.argmax())
            drafts.append(prev)
            rows.append(row)
        return drafts, torch.stack(rows), torch.stack(conf)


def main() -> None:
    ckpt, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    model = Model(ckpt)
    dspark = Dspark(model)
    tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    sha = hashlib.sha256((ckpt / "model.safetensors").read_bytes()).hexdigest()
    bos = model.c["bos_token_id"]
    for name, text in (("short", SHORT), ("long", LONG)):
        ids = [bos] + tok.encode(text, add_special_tokens=False).ids
        y = int(model.forward(ids)[0][-1].argmax())
        drafts, rows, conf = dspark.draft(ids, y)
        tensors = {
            "input_ids": torch.tensor(ids, dtype=torch.int32),
            "y": torch.tensor([y], dtype=torch.int32),
            "drafts": torch.tensor(drafts, dtype=torch.int32),
            "draft_logits": rows.float().contiguous(),
            "confidence": conf.contiguous(),
        }
        meta = {"checkpoint_sha256": sha, "torch": torch.__version__, "text": text, "arithmetic": "float64",
                "stored": "draft_logits rounded to f32; confidence f64"}
        save_file(tensors, str(out / f"dspark_{name}.safetensors"), metadata=meta)
        print(f"{name}: {len(ids)} tokens, y {y}, drafts {drafts}")


if __name__ == "__main__":
    main()
