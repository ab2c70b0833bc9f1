"""Paths and inputs shared by the quality harness scripts."""
from __future__ import annotations

import gzip
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "quality")
CACHE = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "quality-cache")

#: The texts the KV experiments run on (committed under texts/; see texts/README.md).
TEXTS = ("gpl3", "execmodel")


def text(name: str) -> str:
    with open(os.path.join(HERE, "texts", name + ".txt"), encoding="utf-8") as f:
        return f.read()


def passages():
    """The committed passage corpus (make_passages.py), one passage per line."""
    with gzip.open(os.path.join(HERE, "data", "passages.txt.gz"), "rt", encoding="utf-8") as f:
        return [ln for ln in f.read().split("\n") if ln]
