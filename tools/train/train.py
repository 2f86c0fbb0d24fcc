"""Train the TensorFold demo model (DeepSeek V4 architecture, every V4 feature on), export it in the official V4
layout and evaluate the exported checkpoint as transformers computes it.

Usage: python train.py --data DIR --tokenizer DIR --out CKPT_DIR --report REPORT.json [--preset demo] [--steps N]
DIR holds train.bin and heldout.bin (train_tokenizer.py). Deterministic given --seed on one device kind.
"""

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse
import hashlib
import json
import math
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch
import transformers

import v4_export as vx
import v4_model as vm

HERE = Path(__file__).resolve().parent
for ref in (HERE / "reference", HERE.parent / "reference"):
    if (ref / "dsv4_load.py").exists():
        sys.path.insert(0, str(ref))
        break
import dsv4_load  # noqa: E402

PLAIN_PROMPT = "The king"
CHAT_PROMPT = "Good morrow, friend. What news from the court?"
SAMPLE_PROMPT = "It was a dark and stormy night"
GENERATION = {"bos_token_id": 0, "eos_token_id": 1, "do_sample": True, "temperature": 0.7, "top_p": 0.9}


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=0.1)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    ap.add_argument("--dense-index-frac", type=float, default=0.1, help="first steps: indexer keeps every entry")
    ap.add_argument("--qat-frac", type=float, default=0.15, help="last steps: forward on exported values")
    ap.add_argument("--val-windows", type=int, default=32, help="training-stream tail kept out for val loss")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-windows", type=int, default=0, help="held-out windows to evaluate; 0 = all")
    ap.add_argument("--eval-batch", type=int, default=16)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--check-determinism", type=int, default=0, help="train N steps twice and compare")
    ap.add_argument("--time-limit", type=float, default=1e9, help="stop training early past this many seconds")
    ap.add_argument("--warn-only", action="store_true", help="non-deterministic ops warn instead of failing")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return ap.parse_args()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_tokens(path: Path, device: str) -> torch.Tensor:
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64)).to(device)


def lr_at(step: int, args) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def set_index_topk(model, k: int) -> None:
    for layer in model.model.layers:
        comp = layer.self_attn.compressor
        if comp is not None and hasattr(comp, "indexer"):
            comp.indexer.index_topk = k


def optimizer(model, mtp, args):
    decay, no_decay = [], []
    for owner in (model, mtp):
        for name, p in owner.named_parameters():
            (decay if p.dim() >= 2 and "hc" not in name else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


class Trainer:
    def __init__(self, args, cfg: dict, train_tokens: torch.Tensor):
        self.args, self.cfg, self.tokens = args, cfg, train_tokens
        self.model, self.mtp = vm.build(cfg, args.seed)
        vm.use_dense_experts(self.model)
        vm.use_dense_experts(self.mtp)
        vx.check_coverage(self.model, self.mtp, cfg)
        self.model.to(args.device).train()
        self.mtp.to(args.device).train()
        self.taps = vm.Taps(self.model, self.mtp)
        self.opt = optimizer(self.model, self.mtp, args)
        self.swap = vx.QuantSwap(self.model, self.mtp, cfg)
        self.gen = torch.Generator().manual_seed(args.seed + 2)
        self.window = args.seq + 1
        self.num_starts = train_tokens.numel() - args.val_windows * self.window - self.window
        self.dense_steps = int(args.dense_index_frac * args.steps)
        self.qat_start = args.steps - int(args.qat_frac * args.steps)
        self.history = []

    def batch(self) -> torch.Tensor:
        starts = torch.randint(0, self.num_starts, (self.args.batch,), generator=self.gen)
        idx = starts.to(self.tokens.device)[:, None] + torch.arange(self.window, device=self.tokens.device)
        return self.tokens[idx]

    def step(self, step: int) -> dict:
        args = self.args
        set_index_topk(self.model, 1 << 30 if step < self.dense_steps else self.cfg["index_topk"])
        for group in self.opt.param_groups:
            group["lr"] = lr_at(step, args)
        ids = self.batch()
        qat = step >= self.qat_start
        if qat:
            self.swap.quantise()
        with torch.autocast(device_type=args.device.split(":")[0], dtype=torch.bfloat16):
            out = vm.forward_losses(self.model, self.mtp, self.taps, ids)
        main, mtp, kl = out["main"].mean(), out["mtp"].mean(), out["indexer"]
        loss = main + args.mtp_weight * mtp + args.indexer_weight * kl
        loss.backward()
        main, mtp, kl = main.detach(), mtp.detach(), kl.detach()
        if qat:
            self.swap.restore()
        params = [p for g in self.opt.param_groups for p in g["params"]]
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        vm.update_router_bias(self.taps, args.bias_rate)
        return {"step": step, "main": main.item(), "mtp": mtp.item(), "indexer_kl": kl.item(),
                "grad_norm": gnorm.item(), "lr": lr_at(step, args), "qat": qat}


@torch.no_grad()
def evaluate(model, mtp, taps, windows: torch.Tensor, batch: int, autocast: bool = False) -> dict:
    """Held-out windows [N, W]: main NLL of tokens 1..W-1, MTP NLL and top-1 hits of tokens 2..W-1."""
    was_training = model.training
    model.eval()
    mtp.eval()
    sums = {"main": 0.0, "mtp": 0.0, "mtp_hit": 0.0}
    counts = {"main": 0, "mtp": 0, "mtp_hit": 0}
    device_type = windows.device.type
    for i in range(0, windows.shape[0], batch):
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=autocast):
            out = vm.forward_losses(model, mtp, taps, windows[i: i + batch])
        for k in sums:
            sums[k] += out[k].double().sum().item()
            counts[k] += out[k].numel()
    model.train(was_training)
    mtp.train(was_training)
    res = {"main_nll": sums["main"] / counts["main"], "mtp_nll": sums["mtp"] / counts["mtp"],
           "mtp_top1": sums["mtp_hit"] / counts["mtp_hit"], "main_tokens": counts["main"], "mtp_tokens": counts["mtp"]}
    res["main_ppl"], res["mtp_ppl"] = math.exp(res["main_nll"]), math.exp(res["mtp_nll"])
    return res


@torch.no_grad()
def generate(model, prompt_ids: list, num_tokens: int, eos: int, device: str, sample=None) -> list:
    """Full recompute each step; greedy unless `sample` = (temperature, top_p, generator)."""
    seq = torch.tensor([prompt_ids], device=device)
    out = []
    for _ in range(num_tokens):
        logits = model(input_ids=seq, use_cache=False).logits[0, -1].float()
        if sample is None:
            nxt = int(logits.argmax())
        else:
            temperature, top_p, gen = sample
            probs = torch.softmax(logits / temperature, dim=-1).cpu()
            sorted_p, order = probs.sort(descending=True)
            keep = (sorted_p.cumsum(0) - sorted_p) < top_p
            sorted_p = sorted_p * keep
            nxt = int(order[torch.multinomial(sorted_p / sorted_p.sum(), 1, generator=gen)])
        out.append(nxt)
        if nxt == eos:
            break
        seq = torch.cat([seq, torch.tensor([[nxt]], device=device)], dim=1)
    return out


def heldout_windows(tokens: torch.Tensor, seq: int, limit: int) -> torch.Tensor:
    n = tokens.numel() // seq
    n = min(n, limit) if limit else n
    return tokens[: n * seq].view(n, seq)


def write_checkpoint(out: Path, cfg: dict, tensors: dict, tokenizer_dir: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(GENERATION, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir / name, out / name)
    vx.save(tensors, out / "model.safetensors")


def evaluate_export(ckpt: Path, windows: torch.Tensor, device: str, batch: int) -> tuple:
    """Loads a checkpoint through tools/reference/dsv4_load.py and evaluates it; returns (report, model)."""
    ref, cfg, _ = dsv4_load.load(ckpt)
    ref.to(device)
    mtp = vm.MTP(cfg).float()
    vx.load_into(ref, mtp, cfg, dsv4_load.read_tensors(ckpt), prefix="mtp.0.")
    mtp.to(device)
    return evaluate(ref, mtp, vm.Taps(ref, mtp, train=False), windows, batch), ref


def samples(ref, tok, num_tokens: int, seed: int, device: str) -> dict:
    """Greedy continuations of a plain and a chat prompt, and a sampled one (generation_config.json's settings)."""
    bos, eos, user, assistant, end_think = 0, 1, 2, 3, 5
    out = {}
    plain = [bos] + tok.encode(PLAIN_PROMPT, add_special_tokens=False).ids
    ids = generate(ref, plain, num_tokens, eos, device)
    out["greedy"] = {"prompt": PLAIN_PROMPT, "prompt_ids": plain, "ids": ids, "text": tok.decode(ids)}
    chat = [bos, user] + tok.encode(CHAT_PROMPT, add_special_tokens=False).ids + [assistant, end_think]
    ids = generate(ref, chat, num_tokens, eos, device)
    out["chat_greedy"] = {"prompt": CHAT_PROMPT, "prompt_ids": chat, "ids": ids,
                          "text": tok.decode(ids, skip_special_tokens=True)}
    plain = [bos] + tok.encode(SAMPLE_PROMPT, add_special_tokens=False).ids
    gen = torch.Generator().manual_seed(seed)
    ids = generate(ref, plain, num_tokens, eos, device, (GENERATION["temperature"], GENERATION["top_p"], gen))
    out["sampled"] = {"prompt": SAMPLE_PROMPT, "prompt_ids": plain, "ids": ids, "text": tok.decode(ids),
                      "temperature": GENERATION["temperature"], "top_p": GENERATION["top_p"], "seed": seed}
    return out


def main() -> None:
    args = parse_args()
    t_start = time.time()
    warnings.simplefilter("default")
    torch.use_deterministic_algorithms(True, warn_only=args.warn_only)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(args.tokenizer / "tokenizer.json"))
    cfg = vm.official_config(args.preset, tok.get_vocab_size())
    train_tokens = load_tokens(args.data / "train.bin", args.device)
    heldout = heldout_windows(load_tokens(args.data / "heldout.bin", args.device), args.seq, args.eval_windows)
    val_len = args.val_windows * (args.seq + 1)
    val = train_tokens[-val_len:].view(args.val_windows, args.seq + 1)[:, : args.seq]
    report = {"args": {k: str(v) for k, v in vars(args).items()}, "config": cfg, "versions": {
        "torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0],
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"},
        "train_tokens": train_tokens.numel() - val_len, "val_tokens": val_len, "heldout_windows": heldout.shape[0]}
    log(f"{report['versions']}, train tokens {report['train_tokens']}, held-out windows {heldout.shape[0]}x{args.seq}")

    if args.check_determinism:
        first = Trainer(args, cfg, train_tokens)
        ref_losses = [first.step(s)["main"] for s in range(args.check_determinism)]
        del first
    trainer = Trainer(args, cfg, train_tokens)
    n_params = sum(p.numel() for p in [*trainer.model.parameters(), *trainer.mtp.parameters()])
    report["parameters"] = n_params
    log(f"parameters {n_params}, dense-indexer steps {trainer.dense_steps}, QAT from step {trainer.qat_start}")
    t_train = time.time()
    stopped_at = None
    for step in range(args.steps):
        rec = trainer.step(step)
        rec["t"] = time.time() - t_train
        trainer.history.append(rec)
        if args.check_determinism and step < args.check_determinism:
            same = rec["main"] == ref_losses[step]
            report.setdefault("determinism", []).append({"step": step, "same": same, "a": ref_losses[step],
                                                         "b": rec["main"]})
        if step % 50 == 0 or step == args.steps - 1:
            el = time.time() - t_train
            log(f"step {step} main {rec['main']:.4f} mtp {rec['mtp']:.4f} kl {rec['indexer_kl']:.4f} "
                f"gnorm {rec['grad_norm']:.2f} lr {rec['lr']:.2e} qat {rec['qat']} {el / (step + 1) * 1000:.0f} ms/step")
        if (step + 1) % args.eval_every == 0 or step == args.steps - 1:
            v = evaluate(trainer.model, trainer.mtp, trainer.taps, val, args.eval_batch, autocast=True)
            rec["val"] = v
            log(f"  val main ppl {v['main_ppl']:.2f} mtp ppl {v['mtp_ppl']:.2f} mtp top1 {v['mtp_top1']:.3f}")
        if time.time() - t_start > args.time_limit:
            stopped_at = step
            log(f"time limit: stopping after step {step}")
            break
    train_s = time.time() - t_train
    report.update({"train_seconds": train_s, "steps_done": len(trainer.history), "stopped_early_at": stopped_at,
                   "ms_per_step": 1000 * train_s / len(trainer.history), "history": trainer.history})
    if args.device.startswith("cuda"):
        report["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    log(f"trained {len(trainer.history)} steps in {train_s:.0f} s")

    model, mtp, taps = trainer.model, trainer.mtp, trainer.taps
    set_index_topk(model, cfg["index_topk"])
    report["heldout_master"] = evaluate(model, mtp, taps, heldout, args.eval_batch)
    trainer.swap.quantise()
    report["heldout_fake_quant"] = evaluate(model, mtp, taps, heldout, args.eval_batch)
    tensors = vx.export_tensors(model, mtp, cfg)
    trainer.swap.restore()
    try:
        write_checkpoint(args.out, cfg, tensors, args.tokenizer)
        size = (args.out / "model.safetensors").stat().st_size
        report["checkpoint"] = {"bytes": size, "tensors": len(tensors),
                                "sha256": hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest()}
        report["heldout_export"], ref = evaluate_export(args.out, heldout, args.device, args.eval_batch)
        report["samples"] = samples(ref, tok, args.gen_tokens, args.seed, args.device)
    except Exception:
        traceback.print_exc()
        masters = {n: p.detach().cpu().contiguous() for n, p in [*model.state_dict().items(),
                                                                 *(("mtp." + k, v) for k, v in mtp.state_dict().items())]}
        vx.save(masters, args.out.parent / "masters.safetensors")
        report["error"] = traceback.format_exc()
    report["total_seconds"] = time.time() - t_start
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1) + "\n")
    for key in ("heldout_master", "heldout_fake_quant", "heldout_export"):
        r = report.get(key)
        if r:
            log(f"{key}: main ppl {r['main_ppl']:.3f} mtp ppl {r['mtp_ppl']:.3f} mtp top1 {r['mtp_top1']:.4f}")
    for name, s in report.get("samples", {}).items():
        log(f"{name}: {s['prompt']!r} -> {s['text']!r}")
    if "determinism" in report:
        log(f"determinism: {sum(d['same'] for d in report['determinism'])}/{len(report['determinism'])} steps identical")
    log(f"total {report['total_seconds']:.0f} s")
    if "error" in report:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
