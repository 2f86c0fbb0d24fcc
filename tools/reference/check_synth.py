"""Check that a synth checkpoint loads in transformers' DeepseekV4ForCausalLM and gives finite, spread logits.

Usage: python tools/reference/check_synth.py DIR   (DIR written by `tensorfold synth --family dsv4`)
"""

import sys
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast

from dsv4_load import load

PROMPT = "The quick brown fox jumps over the lazy dog. " * 30


def main() -> None:
    ckpt = Path(sys.argv[1])
    model, raw, tensors = load(ckpt)
    hash_layers = raw["num_hash_layers"]
    for i in range(hash_layers):
        got = model.model.layers[i].mlp.gate.tid2eid
        want = tensors[f"layers.{i}.ffn.gate.tid2eid"]
        if not torch.equal(got, want):
            raise SystemExit(f"layer {i}: tid2eid was not loaded from the checkpoint")
    tok = PreTrainedTokenizerFast(tokenizer_file=str(ckpt / "tokenizer.json"))
    ids = torch.tensor([[raw["bos_token_id"]] + tok(PROMPT)["input_ids"]])
    with torch.no_grad():
        logits = model(ids).logits[0]
    finite = bool(torch.isfinite(logits).all())
    spread = logits.std(dim=-1)
    top = logits.argmax(dim=-1)
    print(f"tokens {ids.shape[1]}, logits {tuple(logits.shape)}, finite {finite}, "
          f"per-row std min {spread.min():.3f} mean {spread.mean():.3f}, distinct argmax {top.unique().numel()}")
    if not finite:
        raise SystemExit("logits are not finite")
    if spread.min() < 0.1 or top.unique().numel() < 2:
        raise SystemExit("logits have no real spread")
    print("OK: transformers loaded every tensor and gives finite logits with real spread")


if __name__ == "__main__":
    main()
