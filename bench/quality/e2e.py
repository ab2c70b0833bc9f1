"""End to end: a decode run whose KV cache lives in the store's KV API.

SmolLM2 processes the text in chunks of CHUNK tokens (a decode that emits CHUNK tokens
per step; one token per step would read the whole cache 2048 x 30 times in numpy). Each
step, per layer, appends the chunk's keys and values to `tensorvault.KvCache` (one
`L{layer}.H{head}.{k|v}` tensor per KV head) and reads back the whole token range attention
reads; after each step the store's own tiering runs (`maintain`), so older blocks are
demoted by the store's policy while the recent window (and sinks, where the cache keeps
them) stay raw. Reported: the perplexity of the whole text against the same chunked run
with a plain f16 cache in memory, and the collection's bytes on disk against that f16
cache's bytes.

Until `tensorvault.KvCache` is bound in Python, this section reports "pending".
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Dict, Tuple

import numpy as np

import tensorvault as tv
from kv_eval import nll_ppl

CHUNK = 64


class MemCache:
    """The reference: an f16 cache in numpy."""

    def __init__(self, n_layer: int) -> None:
        self.k = [None] * n_layer
        self.v = [None] * n_layer

    def append(self, layer, k, v):
        self.k[layer] = k if self.k[layer] is None else np.concatenate([self.k[layer], k], 1)
        self.v[layer] = v if self.v[layer] is None else np.concatenate([self.v[layer], v], 1)

    def read(self, layer, end):
        return self.k[layer][:, :end], self.v[layer][:, :end]

    def step(self):
        pass


class StoreCache:
    """The cache in `tensorvault.KvCache` (blocks per tier from its `stats()["blocks"]`)."""

    def __init__(self, root: str, n_kv: int, head_dim: int, policy: Dict) -> None:
        self.n_kv = n_kv
        # With a RoPE spec the model hands the cache keys before RoPE (smollm.py) and
        # the cache returns them after it.
        self.pre_rope = policy.get("rope") is not None
        self.kv = tv.KvCache(root, "q", "kv", head_dim=head_dim, durability="os", **policy)
        self.maintained = 0

    def append(self, layer, k, v):
        for h in range(self.n_kv):
            self.kv.append(layer, h, "k", np.ascontiguousarray(k[h]))
            self.kv.append(layer, h, "v", np.ascontiguousarray(v[h]))

    def read(self, layer, end):
        ks = [self.kv.read(layer, h, "k", 0, end) for h in range(self.n_kv)]
        vs = [self.kv.read(layer, h, "v", 0, end) for h in range(self.n_kv)]
        return np.stack(ks), np.stack(vs)

    def step(self):
        r = self.kv.maintain()
        self.maintained += len(r.get("moves", [])) if isinstance(r, dict) else 0

    def stats(self) -> Dict:
        return self.kv.stats()

    def close(self):
        self.kv.close()


def run(m, ids: np.ndarray, cache) -> float:
    logits = []
    for s in range(0, len(ids), CHUNK):
        logits.append(m.forward_chunk(ids[s:s + CHUNK], s, cache))
        cache.step()
    return nll_ppl(np.concatenate(logits), ids)


def _disk_bytes(path: str) -> Tuple[int, int]:
    """(bytes allocated on disk, as `du` counts them; apparent file sizes). Tier files
    grow ahead of use in sparse steps, which the apparent size counts and the disk does
    not hold."""
    alloc = apparent = 0
    for dp, _, fns in os.walk(path):
        for fn in fns:
            st = os.stat(os.path.join(dp, fn))
            alloc += st.st_blocks * 512
            apparent += st.st_size
    return alloc, apparent


# The store's KV tiering the run uses (KvCache keyword arguments); the first that the
# binding accepts wins (older bindings have neither option).
POLICIES = [
    # Blocks of 128 tokens; a block goes to 5 bits when it fills up (the partial tail, up
    # to 127 tokens, stays raw) and to 3 bits once 256 newer tokens follow it; the first
    # token of every tensor stays f16 (the KV layout's sink).
    {"block_tokens": 128, "age_tiers": (0, 0, 256)},
    {},
]


_REF: Dict[bytes, float] = {}


def evaluate(m, ids: np.ndarray, log=print) -> Dict:
    if not hasattr(tv, "KvCache"):
        msg = "tensorvault.KvCache is not bound in Python yet"
        log(f"    pending: {msg}")
        return {"pending": msg}
    t0 = time.time()
    key = ids.tobytes()
    if key not in _REF:  # one reference run per token sequence
        _REF[key] = run(m, ids, MemCache(m.n_layer))
    ref = _REF[key]
    log(f"    f16 in-memory cache: perplexity {ref:.3f} ({time.time() - t0:.0f}s)")
    root = tempfile.mkdtemp(prefix="tvq-e2e-")
    try:
        t0 = time.time()
        # e.g. TVQ_E2E_POLICY='{"block_tokens": 128, "age_tiers": (0, 0, 256),
        # "rope": (100000.0, 64, "interleaved"), "codec": 4}'
        policy = os.environ.get("TVQ_E2E_POLICY")
        policies = [eval(policy)] if policy else POLICIES  # noqa: S307 (harness knob)
        for p in policies:
            try:
                c = StoreCache(root, m.n_kv, m.hd, p)
                break
            except TypeError:
                continue
        ppl = run(m, ids, c)
        st = c.stats()
        payload = int(sum(st["payload_bytes"])) if "payload_bytes" in st else None
        # Bytes the live blocks take in the tier files (slots, or extents).
        live = int(sum(u.get("live_bytes", 0) for u in st.get("usage", []))) or None
        c.close()
        disk, apparent = _disk_bytes(root)
        f16 = len(ids) * m.hd * 2 * 2 * m.n_kv * m.n_layer
        tiers = list(st["blocks"]) if "blocks" in st else "-"
        r = {"tokens": int(len(ids)), "ppl_ref": ref, "ppl": ppl, "ppl_change_pct": (ppl / ref - 1) * 100,
             "disk_bytes": disk, "apparent_bytes": apparent, "f16_bytes": f16, "tier_blocks": tiers,
             "payload_bytes": payload, "live_bytes": live,
             "chunk": CHUNK, "policy": {k: list(v) if isinstance(v, tuple) else v for k, v in p.items()}}
        log(f"    store cache ({p}): perplexity {ppl:.3f} ({r['ppl_change_pct']:+.2f}%), {disk} bytes on disk "
            f"= {disk / f16 * 100:.1f}% of the f16 cache (apparent {apparent / f16 * 100:.1f}%, "
            f"payload {(payload or 0) / f16 * 100:.1f}%, live {(live or 0) / f16 * 100:.1f}%), "
            f"blocks per tier {tiers} ({time.time() - t0:.0f}s)")
        return r
    except (TypeError, AttributeError) as e:
        msg = f"tensorvault.KvCache exists but its API is not the one this harness drives: {e}"
        log(f"    pending: {msg}")
        return {"pending": msg}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    """`python bench/quality/e2e.py [--text gpl3] [--tokens 2048] [--policy DICT ...]`:
    the end-to-end run alone, once per policy (KvCache keyword arguments as a Python
    dict literal), each against the same f16 reference run."""
    import argparse
    import json
    import sys

    from common import text
    from smollm import SmolLM

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--text", default="gpl3")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--policy", action="append", default=[])
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    m = SmolLM()
    ids = m.encode(text(a.text))[: a.tokens]
    out = []
    for p in a.policy or [repr(POLICIES[0])]:
        os.environ["TVQ_E2E_POLICY"] = p
        out.append(evaluate(m, ids, log=lambda s: print(s, file=sys.stderr, flush=True)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
