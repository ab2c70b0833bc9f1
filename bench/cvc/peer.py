"""Time the reference package `decompressed` (CPU path) and plain numpy on one array.

Prints JSON lines like the Rust side (`cvc_bench`), so `run.sh` can compute ratios.
Every figure is the median of REPEATS runs, in GB/s of f32 data (input for pack,
output for load).

    python peer.py INPUT.npy WORKDIR [REPEATS]
"""
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

warnings.simplefilter("ignore")
import decompressed  # noqa: E402
from decompressed import load_cvc, pack_cvc  # noqa: E402


def timed(repeats, fn):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = fn()
        out.append(time.perf_counter() - t)
        del r
    return statistics.median(out)


def main():
    src, work = Path(sys.argv[1]), Path(sys.argv[2])
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    x = np.load(src)
    gb = x.nbytes / 1e9

    def emit(impl, op, secs):
        print(json.dumps({"impl": impl, "op": op, "seconds": round(secs, 6), "gb_per_s": round(gb / secs, 3)}))

    emit("numpy", "memcpy_fresh", timed(repeats, lambda: x.copy()))
    for comp in ("fp16", "int8"):
        path = str(work / f"ref_{comp}.cvc")
        emit("decompressed", f"pack_{comp}_file", timed(repeats, lambda: pack_cvc(x, path, compression=comp)))
        emit("decompressed", f"load_{comp}_mmap",
             timed(repeats, lambda: load_cvc(path, device="cpu", backend="auto")))
    print(json.dumps({"impl": "decompressed", "op": "info", "version": __import__("importlib.metadata").metadata.version("decompressed"),
                      "backends": {k: bool(v) for k, v in decompressed.get_available_backends().items()},
                      "numpy": np.__version__}))


if __name__ == "__main__":
    main()
