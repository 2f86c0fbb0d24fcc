"""Goldens for the DeepSeek V4 forward pass: transformers' DeepseekV4ForCausalLM on the `tiny` synth checkpoint.

Usage: tools/reference/run.sh dsv4_golden.py CKPT OUT   (CKPT from `tensorfold synth --preset tiny --seed 0`)
Writes OUT/{short,long}.safetensors: input ids, every decoder layer's output streams at chosen positions, the
final logits, the top-64 logits at the chosen positions and a 32-token greedy continuation (full recompute).
"""

import hashlib
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers import PreTrainedTokenizerFast

from dsv4_load import load

SHORT = "The harbour was quiet at dawn, and the fishing boats rocked gently on the grey water."
LONG = (
    "In the old town by the river there was a clockmaker who repaired every kind of clock, from tall cases "
    "that stood in the halls of merchants to small brass watches carried by sailors. Each morning he opened "
    "his shutters, swept the step, and set out the day's work on a bench beneath the window. Children stopped "
    "to watch the wheels turn, and travellers asked him for the time although a dozen faces on the wall "
    "already told it. He kept a ledger of every repair, with the owner's name, the fault he found and the "
    "price he charged, and in winter evenings he read it back like a diary of the town. When the bridge was "
    "rebuilt, the engineers came to him to set the great clock on its tower, and he climbed the ladder each "
    "week for forty years to wind it, oil the pivots and listen to the escapement. The town grew, trains "
    "arrived, electric lamps replaced the gas, and still the tower clock kept its beat above the square, "
    "because the clockmaker believed that a promise to keep time was the same promise whether anyone checked "
    "it or not. His apprentice, a quiet girl from the mill, learned to cut wheels and file teeth, and she "
    "wrote in the ledger in a neater hand than his."
)
GREEDY_TOKENS = 32
TOP = 64


def positions(n: int) -> list:
    """Chosen positions: the start, window and compression boundaries, and the end."""
    picks = {0, 1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 63, 64, 127, 128, 129, 255, 256, n - 2, n - 1}
    return sorted(p for p in picks if 0 <= p < n)


def run(model, ids: torch.Tensor):
    outs = []
    hooks = [layer.register_forward_hook(lambda m, a, o: outs.append(o[0] if isinstance(o, tuple) else o))
             for layer in model.model.layers]
    with torch.no_grad():
        logits = model(ids).logits[0]
    for h in hooks:
        h.remove()
    return logits, [o[0] for o in outs]


def greedy(model, ids: torch.Tensor) -> list:
    seq = ids.clone()
    out = []
    for _ in range(GREEDY_TOKENS):
        with torch.no_grad():
            nxt = int(model(seq).logits[0, -1].argmax())
        out.append(nxt)
        seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
    return out


def main() -> None:
    ckpt, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    model, raw, _ = load(ckpt)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(ckpt / "tokenizer.json"))
    sha = hashlib.sha256((ckpt / "model.safetensors").read_bytes()).hexdigest()
    for name, text in (("short", SHORT), ("long", LONG)):
        ids = torch.tensor([[raw["bos_token_id"]] + tok(text)["input_ids"]])
        logits, layers = run(model, ids)
        pos = torch.tensor(positions(ids.shape[1]))
        top = logits[pos].topk(TOP, dim=-1)
        tensors = {
            "input_ids": ids[0].to(torch.int32),
            "positions": pos.to(torch.int32),
            "logits_last": logits[-1].contiguous(),
            "top_ids": top.indices.to(torch.int32).contiguous(),
            "top_logits": top.values.contiguous(),
            "greedy": torch.tensor(greedy(model, ids), dtype=torch.int32),
        }
        for i, h in enumerate(layers):
            tensors[f"layer.{i}"] = h[pos].contiguous()
        meta = {"checkpoint_sha256": sha, "transformers": transformers.__version__, "torch": torch.__version__,
                "text": text}
        save_file(tensors, str(out / f"{name}.safetensors"), metadata=meta)
        print(f"{name}: {ids.shape[1]} tokens, greedy {tensors['greedy'].tolist()[:8]}...")


if __name__ == "__main__":
    main()
