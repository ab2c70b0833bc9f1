"""Build the committed passage corpus `data/passages.txt.gz` for the embedding benchmark.

Source: English prose available offline: every docstring of CPython's standard library
(`Lib/**/*.py`, tests and idlelib excluded; PSF licence), the Python Language Reference
text in `pydoc_data/topics.py` (PSF), the docstrings of the packages installed in the running
Python's site-packages (on the machine that made the committed file: sympy, networkx,
botocore, docutils, pygments, IPython, flask, pip, setuptools, ...; each under its own open
licence; tests excluded) and the licence texts in /usr/share/common-licenses (if present). Each is split into sentences;
a passage is a sentence of 40-300 characters with at least 6 words, mostly letters, no
code (no `>>>`, braces or `=`), seen once (exact duplicates dropped). The result is
shuffled with a fixed seed and the first N kept, one passage per line, so every clone
benchmarks the same passages whatever Python it runs.

    python make_passages.py [--n 21000]
"""
from __future__ import annotations

import argparse
import ast
import gzip
import os
import random
import re
import sys
import sysconfig

SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def docstrings(root: str):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in ("test", "tests", "idlelib", "site-packages", "__pycache__"))
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            try:
                src = open(os.path.join(dirpath, fn), encoding="utf-8").read()
                tree = ast.parse(src)
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    d = ast.get_docstring(node)
                    if d:
                        yield d


def topics():
    import pydoc_data.topics as t

    for k in sorted(t.topics):
        yield t.topics[k]


def sentences(text: str):
    for para in re.split(r"\n\s*\n", text):
        flat = " ".join(para.split())
        for s in SENT.split(flat):
            yield s.strip()


def good(s: str) -> bool:
    if not 40 <= len(s) <= 300 or len(s.split()) < 6:
        return False
    if any(c in s for c in "{}=<>|\\") or "  " in s or s.count("*") > 2:
        return False
    letters = sum(c.isalpha() or c == " " for c in s)
    return letters / len(s) > 0.85 and s[0].isupper()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=21000)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "data", "passages.txt.gz"))
    a = ap.parse_args()
    seen, out = set(), []
    texts = list(topics()) + list(docstrings(sysconfig.get_paths()["stdlib"]))
    texts += list(docstrings(sysconfig.get_paths()["purelib"]))
    lic = "/usr/share/common-licenses"
    if os.path.isdir(lic):
        for fn in sorted(os.listdir(lic)):
            p = os.path.join(lic, fn)
            if os.path.isfile(p) and not os.path.islink(p):
                texts.append(open(p, encoding="utf-8", errors="replace").read())
    for text in texts:
        for s in sentences(text):
            if good(s) and s not in seen:
                seen.add(s)
                out.append(s)
    random.Random(14).shuffle(out)
    if len(out) < a.n:
        sys.exit(f"only {len(out)} passages found, wanted {a.n}")
    with gzip.GzipFile(a.out, "wb", mtime=0) as f:
        f.write(("\n".join(out[: a.n]) + "\n").encode("utf-8"))
    print(f"{len(out)} candidate passages, wrote {a.n} to {a.out}")


if __name__ == "__main__":
    main()
