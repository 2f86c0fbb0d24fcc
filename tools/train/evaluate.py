"""Held-out perplexity (main model and MTP layer) and sample continuations of a checkpoint, as transformers computes them.

Usage: python tools/train/evaluate.py --ckpt models/tensorfold-demo --heldout models/tensorfold-demo-heldout.bin
       [--windows N] [--seq 512] [--device cpu] [--gen-tokens 64] [--json OUT.json]
The held-out stream is cut into consecutive windows of --seq tokens, each run on its own: the main model is scored
on tokens 1..seq-1 of each window, the MTP layer on tokens 2..seq-1 (it sees the main model's last streams and
the token after each position). Perplexity is exp(mean negative log-likelihood) over all scored tokens.
"""

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer

import train


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", type=Path, required=True)
    ap.add_argument("--heldout", type=Path, required=True)
    ap.add_argument("--windows", type=int, default=0, help="0 = every whole window")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    windows = train.heldout_windows(train.load_tokens(args.heldout, args.device), args.seq, args.windows)
    res, ref = train.evaluate_export(args.ckpt, windows, args.device, args.batch)
    res["windows"] = windows.shape[0]
    print(f"{windows.shape[0]} windows x {args.seq}: main ppl {res['main_ppl']:.4f} (nll {res['main_nll']:.6f}), "
          f"MTP ppl {res['mtp_ppl']:.4f} (nll {res['mtp_nll']:.6f}), MTP top-1 {res['mtp_top1']:.4f}")
    if args.gen_tokens:
        tok = Tokenizer.from_file(str(args.ckpt / "tokenizer.json"))
        res["samples"] = train.samples(ref, tok, args.gen_tokens, args.seed, args.device)
        for name, s in res["samples"].items():
            print(f"{name}: {s['prompt']!r} -> {s['text']!r}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
