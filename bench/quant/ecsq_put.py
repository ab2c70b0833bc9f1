"""Put all-MiniLM-L6-v2's 40 weight matrices (22.7M f32 values) into a fresh
`Store(codec=4, entropy=True, ecsq=True)` at tier 2 and tier 3 and time it: the ECSQ
encoder through the product. Run it once per build to compare (each build in its own
process: `PYTHONPATH=DIR` puts a copied `tensorvault` package first).

    OPENBLAS_NUM_THREADS=1 [PYTHONPATH=/path/to/old] bench/quality/.venv/bin/python \
        bench/quant/ecsq_put.py [--reps 3] [--label after]

Prints one line per tier: median wall and CPU seconds of the puts, MiB/s of f32 input,
and a digest of what `get_tensor` returns (equal digests = the same bytes decoded).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quality"))
import tensorvault as tv  # noqa: E402
from minilm import load_weights, weight_matrices  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    mats = list(weight_matrices(load_weights()).values())
    values = sum(m.size for m in mats)
    for tier in (2, 3):
        walls, cpus, digest = [], [], None
        for _ in range(a.reps):
            d = tempfile.mkdtemp(prefix="tv-ecsq-put-")
            try:
                with tv.Store(d, "b", "w", codec=4, entropy=True, ecsq=True, durability="os") as s:
                    w0, c0 = time.perf_counter(), time.process_time()
                    for i, m in enumerate(mats):
                        s.put_tensor(f"m{i}", m, tier=tier, kind="weight")
                    walls.append(time.perf_counter() - w0)
                    cpus.append(time.process_time() - c0)
                    h = hashlib.sha256()
                    for i in range(len(mats)):
                        h.update(np.asarray(s.get_tensor(f"m{i}")).tobytes())
                    digest = h.hexdigest()[:16]
            finally:
                shutil.rmtree(d, ignore_errors=True)
        mib = values * 4 / 2**20
        w, c = float(np.median(walls)), float(np.median(cpus))
        print(f"{a.label} tier {tier}: {values} values, wall {w:.2f} s ({mib / w:.1f} MiB/s), "
              f"cpu {c:.2f} s ({mib / c:.1f} MiB/s), decoded sha256 {digest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
