"""KvCache decode-step rate per durability policy (issue 26 item 3: the default's cost).

    python bench/python/kv_durability.py [STEPS]

A step appends one token's keys and values for 4 heads of one layer (8 tensors, one
store batch), as a decode loop does; the cache lives in a temporary directory on the
machine's disk. Prints steps/s per policy (median of 3 runs) and the ratio to "os".
"""

import statistics
import sys
import tempfile
import time

import numpy as np
import tensorvault as tv

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
HEADS, HEAD_DIM = 4, 64


def run(durability: str) -> float:
    rng = np.random.default_rng(0)
    tok = rng.standard_normal((1, HEAD_DIM)).astype(np.float16)
    with tempfile.TemporaryDirectory() as d:
        with tv.KvCache(d, "bench", "kv", HEAD_DIM, durability=durability) as kv:
            t = time.perf_counter()
            for _ in range(STEPS):
                kv.append_batch([(0, h, kind, tok) for h in range(HEADS) for kind in ("k", "v")])
            return STEPS / (time.perf_counter() - t)


rates = {p: statistics.median(run(p) for _ in range(3)) for p in ("os", "every-write")}
for p, r in rates.items():
    print(f"{p:>12}: {r:8.0f} steps/s  ({r / rates['os']:.3f}x of os)")
