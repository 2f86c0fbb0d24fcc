"""Train a byte-level BPE tokenizer on the corpus and encode the corpus with it.

Usage: python tools/train/train_tokenizer.py --data DIR --out MODEL_DIR [--vocab 4096]
Reads DIR/docs.jsonl (from prepare_corpus.py). Writes MODEL_DIR/{tokenizer.json, tokenizer_config.json} and
DIR/{train.bin, heldout.bin, corpus.json}: little-endian uint16 token ids, each document as BOS text EOS; the
training documents in a seeded shuffle, the held-out ones in file order. Pre-tokenizer, normalizer, decoder and
post-processor are DeepSeek V4's own (copied from assets/tokenizers/deepseek-v4/tokenizer.json).
"""

import argparse
import json
import random
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, trainers
from tokenizers.pre_tokenizers import ByteLevel

REPO = Path(__file__).resolve().parents[2]
DEEPSEEK_TOKENIZER = REPO / "assets" / "tokenizers" / "deepseek-v4" / "tokenizer.json"
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
CHAT_TOKENS = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"]
SPECIALS = [BOS, EOS] + CHAT_TOKENS
SEED = 0
# The chat template of `tensorfold synth` (DeepSeek V4's non-thinking format).
CHAT_TEMPLATE = (
    "{{ bos_token }}{%- for m in messages if m['role'] in ['system', 'developer'] %}{{ m['content'] }}{% endfor %}"
    "{%- for m in messages %}{%- if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
    "{%- elif m['role'] == 'assistant' %}<｜Assistant｜></think>{{ m['content'] }}<｜end▁of▁sentence｜>{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}<｜Assistant｜></think>{% endif %}"
)


def empty_tokenizer() -> Tokenizer:
    """A BPE tokenizer with no vocabulary yet and DeepSeek V4's pre-tokenizer, normalizer, decoder and post-processor."""
    ds = json.loads(DEEPSEEK_TOKENIZER.read_text(encoding="utf-8"))
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": ds["normalizer"], "pre_tokenizer": ds["pre_tokenizer"],
        "post_processor": ds["post_processor"], "decoder": ds["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": {}, "merges": []},
    }
    return Tokenizer.from_str(json.dumps(spec))


def train(texts: list, vocab: int) -> Tokenizer:
    tok = empty_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def legacy_json(tok: Tokenizer) -> str:
    """tokenizer.json with merges as "a b" strings (DeepSeek's own file's form) and every special token marked special."""
    spec = json.loads(tok.to_str())
    spec["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    for t in spec["added_tokens"]:
        t["special"], t["normalized"] = True, False
    return json.dumps(spec, ensure_ascii=False, indent=2)


def tokenizer_config() -> dict:
    return {
        "add_bos_token": False, "add_eos_token": False, "bos_token": BOS, "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False, "eos_token": EOS, "legacy": True, "model_max_length": 1048576,
        "pad_token": EOS, "tokenizer_class": "PreTrainedTokenizerFast",
    }


def encode(tok: Tokenizer, docs: list) -> np.ndarray:
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    ids = []
    for enc in tok.encode_batch([d["text"] for d in docs], add_special_tokens=False):
        ids.extend([bos, *enc.ids, eos])
    return np.asarray(ids, dtype="<u2")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    args = ap.parse_args()
    docs = [json.loads(l) for l in open(args.data / "docs.jsonl", encoding="utf-8")]
    train_docs = [d for d in docs if d["split"] == "train"]
    heldout_docs = [d for d in docs if d["split"] == "heldout"]
    tok = train([d["text"] for d in train_docs if d["kind"] == "text"], args.vocab)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokenizer.json").write_text(legacy_json(tok) + "\n", encoding="utf-8")
    (args.out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), ensure_ascii=False, indent=2) + "\n",
                                                    encoding="utf-8")
    tok = Tokenizer.from_file(str(args.out / "tokenizer.json"))
    assert [tok.token_to_id(t) for t in SPECIALS] == list(range(len(SPECIALS))), "special token ids moved"
    assert tok.get_vocab_size() == args.vocab, f"vocab {tok.get_vocab_size()} != {args.vocab}"
    random.Random(SEED).shuffle(train_docs)
    train_ids, heldout_ids = encode(tok, train_docs), encode(tok, heldout_docs)
    train_ids.tofile(args.data / "train.bin")
    heldout_ids.tofile(args.data / "heldout.bin")
    sample = heldout_docs[0]["text"][:2000]
    assert tok.decode(tok.encode(sample, add_special_tokens=False).ids) == sample, "tokenizer does not round-trip"
    stats = {"vocab_size": tok.get_vocab_size(), "train_tokens": int(train_ids.size),
             "heldout_tokens": int(heldout_ids.size), "train_docs": len(train_docs), "heldout_docs": len(heldout_docs),
             "train_bytes": sum(len(d["text"].encode()) for d in train_docs)}
    (args.data / "corpus.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
