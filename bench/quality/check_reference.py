"""Check the numpy SmolLM2 forward pass against llama.cpp on the same GGUF file.

    bash bench/quality/check_reference.sh

llama.cpp's `llama-perplexity -c 1024 --chunks 2` scores, in each 1024-token chunk, the
predictions of tokens 513..1023 from logits 512..1022 (the first half is context only).
This script computes the same figure with `smollm.py`, and compares the tokenization with
`llama-tokenize`'s. Arguments: the llama.cpp bin directory.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, TEXTS, text  # noqa: E402
from smollm import SmolLM, model_path  # noqa: E402


def ours(m: SmolLM, ids: np.ndarray, n_ctx: int = 1024, chunks: int = 2) -> float:
    nll = []
    first = n_ctx // 2
    for c in range(chunks):
        ch = ids[c * n_ctx:(c + 1) * n_ctx]
        lg = m.forward(ch)[first:n_ctx - 1].astype(np.float64)
        mx = lg.max(-1, keepdims=True)
        lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(-1))
        nll.append(lse - lg[np.arange(len(lg)), ch[first + 1:n_ctx]])
    return float(np.exp(np.concatenate(nll).mean()))


def main() -> None:
    bindir = sys.argv[1]
    m = SmolLM()
    for name in TEXTS:
        path = os.path.join(HERE, "texts", name + ".txt")
        tok = subprocess.run([os.path.join(bindir, "llama-tokenize"), "-m", model_path(), "-f", path,
                              "--ids", "--log-disable"], capture_output=True, text=True, check=True)
        ref_ids = ast.literal_eval(tok.stdout.strip().splitlines()[-1])
        ids = m.encode(text(name))
        out = subprocess.run([os.path.join(bindir, "llama-perplexity"), "-m", model_path(), "-f", path,
                              "-c", "1024", "--chunks", "2", "-b", "1024", "-t", "2"],
                             capture_output=True, text=True, check=True)
        ref = float(re.search(r"Final estimate: PPL = ([0-9.]+)", out.stdout + out.stderr).group(1))
        p = ours(m, ids)
        print(f"{name}: tokens identical to llama-tokenize: {list(ids) == ref_ids} ({len(ids)}); "
              f"perplexity llama.cpp {ref:.4f}, numpy {p:.4f} ({(p / ref - 1) * 100:+.2f}%)")


if __name__ == "__main__":
    main()
