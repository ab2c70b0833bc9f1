"""Side by side from Python, in one process: tensorvault vs decompressed 2.1.1 (CVC pack
and load) and vs safetensors.numpy (registry checkpoint load), plus the peak RSS of a
1 GB CVC load in a child process. Prints a table of medians and ratios.

Usage: python bench.py [reps] [rows] [dim] [REAL.npy ...]   (defaults 5, 200000, 768)

Each REAL.npy (2-D float32, e.g. from bench/cvc/real_data.py) gets its own CVC pack/load
rows next to the synthetic ones, against the same peer.
"""

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import decompressed
import safetensors.numpy
import tensorvault as tv


def timed(fn):
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def median_pair(reps, a, b):
    """Alternate a and b `reps` times; medians of each."""
    ta, tb = [], []
    for _ in range(reps):
        ta.append(timed(a)[0])
        tb.append(timed(b)[0])
    return statistics.median(ta), statistics.median(tb)


HWM = ("def hwm():\n"
       "    for line in open('/proc/self/status'):\n"
       "        if line.startswith('VmHWM:'):\n"
       "            return int(line.split()[1]) * 1024\n")


def rss_child(path):
    """Peak RSS (VmHWM, reset by exec unlike ru_maxrss) of a fresh process that loads
    `path`, and of one that only imports."""
    code = HWM + f"import tensorvault as tv\na = tv.load_cvc({path!r})\nprint(hwm(), a.nbytes)\n"
    base = subprocess.run([sys.executable, "-c", HWM + "import tensorvault, numpy\nprint(hwm())"],
                          capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak, arr = (int(x) for x in out.stdout.split())
    return peak, arr, int(base.stdout)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    dim = int(sys.argv[3]) if len(sys.argv) > 3 else 768
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    gb = x.nbytes / 1e9
    results = []
    real = [(os.path.basename(p)[:-4], np.load(p)) for p in sys.argv[4:]]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
        ours, theirs = os.path.join(d, "tv.cvc"), os.path.join(d, "dc.cvc")
        for name, data in [("synthetic", x)] + real:
            tag = "" if name == "synthetic" else f"[{name} {data.shape[0]}x{data.shape[1]}] "
            for comp in ("fp16", "int8"):
                for sync in (True, False):
                    if name != "synthetic" and not sync:
                        continue
                    t_tv, t_dc = median_pair(
                        reps,
                        lambda: tv.pack_cvc(data, ours, compression=comp, sync=sync),
                        lambda: decompressed.pack_cvc(data, theirs, compression=comp),
                    )
                    label = f"{tag}pack_cvc {comp}" + ("" if sync else " (sync=False)")
                    results.append((label, t_tv, t_dc, "3x"))
                # Same bytes as the reference once our header checksum is left out.
                tv.pack_cvc(data, ours + ".exact", compression=comp, reference_exact=True)
                assert open(ours + ".exact", "rb").read() == open(theirs, "rb").read()
                t_tv, t_dc = median_pair(
                    reps,
                    lambda: tv.load_cvc(ours),
                    lambda: decompressed.load_cvc(theirs, device="cpu"),
                )
                results.append((f"{tag}load_cvc {comp}", t_tv, t_dc, "5x"))
                np.testing.assert_array_equal(tv.load_cvc(ours), decompressed.load_cvc(theirs, device="cpu"))
        os.remove(theirs)

        reg = tv.Registry(os.path.join(d, "reg"), config="default", seed=42)
        reg.save_checkpoint(reg.initialize(), version="1.0.0", source_id="bench")
        ckpt = reg.version_dir("1.0.0")
        st = os.path.join(ckpt, "weights.safetensors")
        ckpt_mb = os.path.getsize(st) / 1e6
        for verify in (True, False):
            t_tv, t_st = median_pair(
                reps,
                lambda: tv.load_checkpoint(ckpt, verify=verify),
                lambda: safetensors.numpy.load_file(st),
            )
            results.append((f"checkpoint load (verify={verify})", t_tv, t_st, "1x"))
        # Loading and then reading every value (page faults on the mapped file included).
        t_tv, t_st = median_pair(
            reps,
            lambda: sum(float(a.sum()) for a in tv.load_checkpoint(ckpt, verify=False).values()),
            lambda: sum(float(a.sum()) for a in safetensors.numpy.load_file(st).values()),
        )
        results.append(("checkpoint load + sum of all values", t_tv, t_st, "-"))
        a = tv.load_checkpoint(ckpt, verify=False)
        b = safetensors.numpy.load_file(st)
        assert all(np.array_equal(a[k], b[k]) for k in b)
        del a, b, reg

        # Peak RSS of a ~1 GB load in a fresh process.
        big_rows = (1 << 30) // (dim * 4) + 1
        big = os.path.join(d, "big.cvc")
        w = tv.CvcWriter(big, dim, compression="fp16", sync=False)
        s = 0
        while s < big_rows:
            n = min(50_000, big_rows - s, len(x))
            w.write(x[:n])
            s += n
        w.close()
        peak, arr_bytes, base_rss = rss_child(big)
        file_bytes = os.path.getsize(big)

    print(f"data: {rows} x {dim} float32 ({gb:.3f} GB), standard normal, seed 1234; "
          f"median of {reps}; registry checkpoint {ckpt_mb:.0f} MB (FuseMoE default shapes)")
    print(f"{'operation':52} {'tensorvault s':>14} {'peer s':>10} {'ratio':>8} {'target':>7}")
    for label, t_tv, t_peer, target in results:
        print(f"{label:52} {t_tv:14.4f} {t_peer:10.4f} {t_peer / t_tv:7.2f}x {target:>7}")
    print(f"1 GB load: array {arr_bytes / 2**20:.0f} MiB, fp16 file {file_bytes / 2**20:.0f} MiB, "
          f"peak RSS {peak / 2**20:.0f} MiB (interpreter + numpy + tensorvault alone: "
          f"{base_rss / 2**20:.0f} MiB) -> peak / array = {peak / arr_bytes:.2f}")
    print(json.dumps({"results": results, "peak_rss": peak, "array_bytes": arr_bytes,
                      "file_bytes": file_bytes, "base_rss": base_rss}))


if __name__ == "__main__":
    main()
