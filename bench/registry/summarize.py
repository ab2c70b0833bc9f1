"""Print the registry side-by-side table from the files bench/registry/run.sh writes.

Usage: python summarize.py WORKDIR
Reads tv_warm.txt, py_warm.txt (one median line per figure), tv_cold.txt, py_cold.txt
(one line per cold run; the median is taken here) and resident.txt. Ratio = Python time
/ tensorvault time (above 1: tensorvault is faster).
"""

import os
import re
import statistics
import sys

LINE = re.compile(r"^(?P<name>.+?)\s+(?P<s>[0-9.]+) s\s+[0-9.infa]+ GB/s$")
CHECKPOINT_BYTES = 322_181_964  # only for the residency line's fallback


def runs_of(path):
    runs = {}
    for line in open(path):
        m = LINE.match(line.strip())
        if m:
            runs.setdefault(m["name"].strip(), []).append(float(m["s"]))
    return runs


def read(path):
    return {k: (statistics.median(v), len(v)) for k, v in runs_of(path).items()}


def main(work):
    d = {k: read(os.path.join(work, f"{k}.txt")) for k in ("tv_warm", "py_warm", "tv_cold", "py_cold")}

    def t(src, name):
        return d[src].get(name, (float("nan"), 0))[0]

    def fmt(s):
        if s < 0.001:
            return f"{s * 1e6:.0f} µs"
        return f"{s * 1e3:.1f} ms" if s < 0.01 else f"{s:.3f} s"

    def ratio(a, b):
        return f"{b / a:.2f}x" if a > 0 else "-"

    rows = [
        # (operation, tv source, tv figure, python source, python figure, target)
        ("init all weights, 2 cores vs `default_rng().uniform` (f64)", "tv_warm", "init rayon",
         "py_warm", "default_rng().uniform f64", ">= 3x"),
        ("init all weights vs `default_rng().random(dtype=float32)`", "tv_warm", "init rayon",
         "py_warm", "default_rng().random f32", ""),
        ("save (atomic dir, fsync) vs `save_file` + fsync", "tv_warm", "save (atomic, fsync)",
         "py_warm", "save_file (+fsync)", ""),
        ("warm load, every value read vs `load_file` + read", "tv_warm", "load +touch all values",
         "py_warm", "load_file +touch", ">= 2x"),
        ("warm load, every value read vs bare `load_file`", "tv_warm", "load +touch all values",
         "py_warm", "load_file", ">= 2x"),
        ("warm load, lazy (mmap + validation) vs `load_file`", "tv_warm", "load mmap+validate",
         "py_warm", "load_file", "lazy"),
        ("cold load, every value read vs `load_file` + read", "tv_cold", "load +touch all values",
         "py_cold", "load_file +touch", ">= 2x"),
        ("cold load, every value read vs bare `load_file`", "tv_cold", "load +touch all values",
         "py_cold", "load_file", ">= 2x"),
        ("cold load, lazy (mmap + validation) vs `load_file`", "tv_cold", "load mmap+validate",
         "py_cold", "load_file", "lazy"),
        ("warm one expert (3 tensors, 38.5 MB) + read vs `safe_open`", "tv_warm", "single expert +touch",
         "py_warm", "safe_open one expert +touch", "only its bytes"),
        ("cold one expert + read vs `safe_open`", "tv_cold", "single expert +touch",
         "py_cold", "safe_open one expert +touch", "only its bytes"),
    ]
    print("| operation | tensorvault | Python peer | ratio | target |")
    print("|---|---|---|---|---|")
    for op, ts, tn, ps, pn, target in rows:
        a, b = t(ts, tn), t(ps, pn)
        n = d[ts].get(tn, (0, 0))[1]
        cold = f" (median of {n} cold runs)" if ts.endswith("cold") else ""
        # A lazy load reads no values, so a ratio against load_file (which reads them) is not
        # a like-for-like figure: print n/a.
        r = "n/a (lazy)" if target == "lazy" else ratio(a, b)
        print(f"| {op}{cold} | {fmt(a)} | {fmt(b)} | {r} | {'' if target == 'lazy' else target} |")

    # Verified loads (issue 17): every byte hashed against the recorded digests, vs
    # Python's load_file, which reads every byte and verifies nothing.
    vrows = [
        # (checkpoint, operation, tv source, tv figure, python source, python figure, target)
        ("synthetic FuseMoE 322 MB", "warm, chunk BLAKE3 on all cores", "tv_warm",
         "load +verify chunks", "py_warm", "load_file", ">= 1x"),
        ("synthetic FuseMoE 322 MB", "warm, whole-file SHA-256 (1 core)", "tv_warm",
         "load +verify whole-file", "py_warm", "load_file", ""),
        ("synthetic FuseMoE 322 MB", "cold, chunk BLAKE3 on all cores", "tv_cold",
         "load +verify chunks", "py_cold", "load_file", ">= 1x"),
        ("synthetic FuseMoE 322 MB", "cold, whole-file SHA-256 (1 core)", "tv_cold",
         "load +verify whole-file", "py_cold", "load_file", ""),
        ("all-MiniLM-L6-v2 91 MB (real)", "warm, chunk BLAKE3 on all cores", "tv_warm",
         "model load +verify chunks", "py_warm", "minilm load_file", ">= 1x"),
        ("all-MiniLM-L6-v2 91 MB (real)", "warm, whole-file SHA-256 (1 core)", "tv_warm",
         "model load +verify whole-file", "py_warm", "minilm load_file", ""),
        ("all-MiniLM-L6-v2 91 MB (real)", "warm, chunks + every value read vs `load_file` + read",
         "tv_warm", "model load +verify chunks +touch", "py_warm", "minilm load_file +touch", ""),
        ("all-MiniLM-L6-v2 91 MB (real)", "cold, chunk BLAKE3 on all cores", "tv_cold",
         "model load +verify chunks", "py_cold", "minilm load_file", ">= 1x"),
        ("all-MiniLM-L6-v2 91 MB (real)", "cold, whole-file SHA-256 (1 core)", "tv_cold",
         "model load +verify whole-file", "py_cold", "minilm load_file", ""),
    ]
    # Cold runs of the two tools alternate within each round, so the ratio of each round's
    # pair is less exposed to the load of the (shared) machine than the ratio of medians.
    raw = {k: runs_of(os.path.join(work, f"{k}.txt")) for k in ("tv_cold", "py_cold")}

    def paired(tn, pn):
        a, b = raw["tv_cold"].get(tn, []), raw["py_cold"].get(pn, [])
        r = [y / x for x, y in zip(a, b) if x > 0]
        return f"{statistics.median(r):.2f}x" if r else "-"

    print("\n| checkpoint | verified load (tensorvault) vs bare `load_file` (no verification) |"
          " tensorvault | Python `load_file` | ratio | median ratio of the cold rounds' pairs | target |")
    print("|---|---|---|---|---|---|---|")
    for ck, op, ts, tn, ps, pn, target in vrows:
        a, b = t(ts, tn), t(ps, pn)
        n = d[ts].get(tn, (0, 0))[1]
        cold = f" (median of {n} runs)" if ts.endswith("cold") else ""
        pr = paired(tn, pn) if ts.endswith("cold") else ""
        print(f"| {ck} | {op}{cold} | {fmt(a)} | {fmt(b)} | {ratio(a, b)} | {pr} | {target} |")
    no_verify = t("tv_warm", "model load (no verify)")
    print(f"\nall-MiniLM-L6-v2 unverified load (mmap + header validation): {fmt(no_verify)};"
          f" save into the registry (copy + whole-file and chunk digests):"
          f" {fmt(t('tv_warm', 'model save (copy+digests)'))}")

    res = {}
    for line in open(os.path.join(work, "resident.txt")):
        m = re.match(r"^(tv|py) resident (\d+) of (\d+) bytes", line)
        if m:
            res.setdefault(m[1], []).append((int(m[2]), int(m[3])))
    for tool, label in (("tv", "tensorvault"), ("py", "Python safe_open")):
        if res.get(tool):
            r = statistics.median(x for x, _ in res[tool])
            total = res[tool][0][1] or CHECKPOINT_BYTES
            print(f"\nafter a cold single-expert load ({label}): {r / 1e6:.1f} MB of the"
                  f" {total / 1e6:.1f} MB file in the page cache (expert 38.5 MB + readahead)", end="")
    print()


if __name__ == "__main__":
    main(sys.argv[1])
