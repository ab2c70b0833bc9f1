"""CVC int4 against int8 load speed on SmolLM2-135M's token table (the table of
int4_recall.py: rows L2-normalised, seeded shuffle, the 48,152 database rows), built for a
loaded shared machine: the two files are loaded in alternation (int8, int4, int8, ...) so
both see the same load, and each load is timed twice: wall clock and the process's CPU
time (`time.process_time`, user + system of every thread: what the load costs whatever
else runs). Warm = file in the page cache; cold = evicted with posix_fadvise(DONTNEED)
before each load. Prints medians and int4/int8 ratios per output byte (both produce the
same f32 array, so per output byte = per load).

    bench/quality/.venv/bin/python bench/cvc/int4_load.py [--reps 15]
"""
import argparse, os, sys, tempfile, time, shutil, statistics as st
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quality"))
sys.path.insert(0, HERE)
import numpy as np, tensorvault as tv
from emb_eval import token_embeddings, N_QUERIES
from evict import evict

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=15)
a = ap.parse_args()
e = token_embeddings()
e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
e = e[np.random.default_rng(0).permutation(len(e))]
db = np.ascontiguousarray(e[N_QUERIES:])
tmp = tempfile.mkdtemp()
paths = {}
for comp in ("int8", "int4"):
    paths[comp] = os.path.join(tmp, comp + ".cvc")
    tv.pack_cvc(db, paths[comp], compression=comp, sync=False)
    tv.load_cvc(paths[comp])  # warm the page cache and the allocator

def timed(p, cold):
    if cold:
        evict(p)
    w0, c0 = time.perf_counter(), time.process_time()
    tv.load_cvc(p)
    return time.perf_counter() - w0, time.process_time() - c0

res = {}
for cold in (False, True):
    runs = {c: [] for c in paths}
    for _ in range(a.reps):
        for c, p in paths.items():
            runs[c].append(timed(p, cold))
    res[cold] = runs
gib = db.nbytes / 2**30
print(f"table {db.shape} f32 out {db.nbytes / 2**20:.1f} MiB, {a.reps} alternated loads each, medians")
print("| load | int8 wall | int4 wall | int4/int8 speed (wall) | int8 CPU | int4 CPU | int4/int8 speed (CPU) |")
print("|---|---|---|---|---|---|---|")
for cold in (False, True):
    r = res[cold]
    w8, w4 = st.median(x[0] for x in r["int8"]), st.median(x[0] for x in r["int4"])
    c8, c4 = st.median(x[1] for x in r["int8"]), st.median(x[1] for x in r["int4"])
    print(f"| {'cold' if cold else 'warm'} | {w8*1e3:.1f} ms ({gib/w8:.2f} GiB/s) | {w4*1e3:.1f} ms ({gib/w4:.2f} GiB/s) | "
          f"{w8/w4:.2f}x | {c8*1e3:.1f} ms | {c4*1e3:.1f} ms | {c8/c4:.2f}x |")
shutil.rmtree(tmp)
