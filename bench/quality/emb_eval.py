"""Embedding quality per tier: nearest-neighbour recall@10 on real embeddings.

Two sets:
* `sentences`: all-MiniLM-L6-v2 sentence embeddings (numpy forward, mean pooling,
  L2-normalised) of the 21,000 committed passages (`data/passages.txt.gz`); computed once
  and cached under target/quality-cache (about 10 minutes on one core);
* `tokens`: SmolLM2's token-embedding table (49152 x 576, Q8_0 in the GGUF, dequantized),
  rows L2-normalised.

The first 1000 rows (the passages are shuffled; the token rows are taken in a seeded
random order) are the queries, kept in f32; the rest is the database, which goes through
the store at each tier (kind="embedding" when the binding has kinds) and through CVC
fp16 / int8 (`tensorvault.pack_cvc` + `load_cvc`). Ground truth: exact top-10 by inner
product (= cosine) over the f32 database, tie-aware (a result counts when its exact
score reaches the exact 10th-best). recall@10 raw: top-10 over the decoded database; 4x
re-scored: top-40 over the decoded database re-ranked with the f32 vectors.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from typing import Dict, List, Tuple

import numpy as np

import tensorvault as tv
from common import CACHE, HERE, passages
from tvstore import roundtrip

N_QUERIES = 1000
K = 10
RESCORE = 4


def sentence_embeddings(limit: int = 0, log=print) -> np.ndarray:
    path = os.path.join(HERE, "data", "passages.txt.gz")
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]
    ps = passages()
    full = os.path.join(CACHE, f"minilm_passages_{digest}_{len(ps)}.npy")
    if os.path.exists(full):
        e = np.load(full)
        return e[:limit] if limit else e
    if limit:
        ps = ps[:limit]
    cache = os.path.join(CACHE, f"minilm_passages_{digest}_{len(ps)}.npy")
    if os.path.exists(cache):
        return np.load(cache)
    from minilm import MiniLM

    t0 = time.time()
    log(f"    embedding {len(ps)} passages with all-MiniLM-L6-v2 (cached afterwards) ...")
    e = MiniLM().embed(ps)
    os.makedirs(CACHE, exist_ok=True)
    np.save(cache, e)
    log(f"    ... {time.time() - t0:.0f}s")
    return e


def token_embeddings() -> np.ndarray:
    import gguf

    from smollm import model_path

    r = gguf.GGUFReader(model_path())
    t = next(t for t in r.tensors if t.name == "token_embd.weight")
    e = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    e /= np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    perm = np.random.default_rng(14).permutation(len(e))
    return np.ascontiguousarray(e[perm])


def word_embeddings() -> np.ndarray:
    """all-MiniLM-L6-v2's word-embedding table (30,522 x 384), rows L2-normalised and
    shuffled as the token table is (a held-out table: never used to choose a layout)."""
    from minilm import load_weights

    w = load_weights()
    e = next(v for k, v in w.items() if k.endswith("word_embeddings.weight")).astype(np.float32)
    e /= np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    perm = np.random.default_rng(14).permutation(len(e))
    return np.ascontiguousarray(e[perm])


def _topk(s: np.ndarray, k: int) -> np.ndarray:
    idx = np.argpartition(-s, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(s, idx, 1), axis=1)
    return np.take_along_axis(idx, order, 1)


def recall(q: np.ndarray, exact: np.ndarray, dec: np.ndarray) -> Tuple[float, float]:
    """(recall@10, recall@10 after re-scoring the top 40 with the f32 vectors).

    Tie-aware: a returned row counts as a true neighbour when its exact score reaches the
    exact 10th-best score (within 1e-6). SmolLM2's token table has many rows with equal
    scores (near-duplicate rarely-trained tokens), where "the" top-10 is not unique."""
    kth = -np.partition(-exact, K - 1, axis=1)[:, K - 1:K] - 1e-6
    s = q @ dec.T
    raw = _topk(s, K)
    cand = _topk(s, K * RESCORE)
    res = np.take_along_axis(cand, _topk(np.take_along_axis(exact, cand, 1), K), 1)

    def rec(a):
        return float((np.take_along_axis(exact, a, 1) >= kth).mean())

    return rec(raw), rec(res)


def evaluate_set(name: str, e: np.ndarray, tiers: List[int], log=print) -> Dict:
    q, db = e[:N_QUERIES], np.ascontiguousarray(e[N_QUERIES:])
    exact = q @ db.T
    res: Dict = {"rows": int(len(db)), "dim": int(db.shape[1]), "tiers": {}, "cvc": {}}
    for tier in tiers:
        dec, stored, values = roundtrip([(name, db, "embedding")], tier)
        d = dec[name].astype(np.float32)
        r0, r4 = recall(q, exact, d)
        res["tiers"][tier] = {"bits": stored * 8.0 / values, "recall": r0, "recall_rescored": r4,
                              "rrmse": float(np.linalg.norm(d - db) / np.linalg.norm(db))}
        log(f"    {name} tier {tier}: bits/value {stored * 8.0 / values:.3f}  recall@10 {r0:.4f}  4x re-scored {r4:.4f}")
    tmp = tempfile.mkdtemp(prefix="tvq-cvc-")
    try:
        for comp in ("fp16", "int8"):
            p = os.path.join(tmp, f"{comp}.cvc")
            tv.pack_cvc(db, p, compression=comp, sync=False)
            d = np.asarray(tv.load_cvc(p), dtype=np.float32)
            r0, r4 = recall(q, exact, d)
            bits = os.path.getsize(p) * 8.0 / db.size
            res["cvc"][comp] = {"bits": bits, "recall": r0, "recall_rescored": r4}
            log(f"    {name} CVC {comp}: bits/value {bits:.3f}  recall@10 {r0:.4f}  4x re-scored {r4:.4f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def evaluate(tiers: List[int], quick: bool = False, log=print) -> Dict:
    out = {}
    t0 = time.time()
    out["sentences"] = evaluate_set("sentences", sentence_embeddings(limit=6000 if quick else 0, log=log), tiers, log)
    out["tokens"] = evaluate_set("tokens", token_embeddings(), tiers, log)
    log(f"    ({time.time() - t0:.0f}s)")
    return out
