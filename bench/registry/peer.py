"""Python peer for the registry bench: safetensors (numpy) and numpy's generator.

Usage: python peer.py CKPT_DIR [REPS]   (CKPT_DIR written by registry_bench, e.g. DIR/ck1)
Prints `name seconds GB/s` lines (median of REPS) on the same ~322 MB file.
"""

import os
import sys
import tempfile
import time

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def median(f, reps):
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    return sorted(t)[len(t) // 2]


def main(ckpt, reps):
    path = os.path.join(ckpt, "weights.safetensors")
    gb = os.path.getsize(path) / 1e9
    rep = lambda name, s, b: print(f"{name:28} {s:8.4f} s {b / s:7.2f} GB/s")
    rep("load_file", median(lambda: load_file(path), reps), gb)
    rep("load_file +touch", median(lambda: sum(float(a.sum(dtype=np.float64)) for a in load_file(path).values()), reps), gb)
    tensors = load_file(path)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(ckpt)) as d:
        def save():
            p = os.path.join(d, "x.safetensors")
            save_file(tensors, p)
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        rep("save_file (+fsync)", median(save, reps), gb)
    names = ["experts.3.input_proj.weight", "experts.3.hidden.weight", "experts.3.output_proj.weight"]
    def one():
        with safe_open(path, framework="np") as f:
            return sum(float(f.get_tensor(n).sum(dtype=np.float64)) for n in names)
    ebytes = 4 * (8320 * 1024 + 1024 * 1024 + 1024 * 192) / 1e9
    rep("safe_open one expert +touch", median(one, reps), ebytes)
    n = sum(a.size for a in tensors.values())
    rng = np.random.default_rng(42)
    rep("default_rng().uniform f64", median(lambda: rng.uniform(-0.02, 0.02, n), reps), n * 4 / 1e9)
    rep("default_rng().random f32", median(lambda: rng.random(n, dtype=np.float32), reps), n * 4 / 1e9)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
