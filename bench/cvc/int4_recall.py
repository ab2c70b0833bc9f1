"""CVC int4 vs fp16 / int8 on a real embedding table (SmolLM2-135M's token embeddings,
rows L2-normalised; the first 1000 rows of a seeded shuffle are the queries): bits per
value as stored, recall@10 raw and with 4x rescoring (bench/quality/emb_eval.py's tie-aware
recall), relative RMSE, and whole-file load time through `tensorvault.load_cvc`, warm
(median of 7) and cold (median of 5, page cache evicted with posix_fadvise before each).

    bench/quality/.venv/bin/python bench/cvc/int4_recall.py   (bench/quality/setup.sh makes the venv;
                                                               the tensorvault wheel installed in it)
"""
import os, sys, tempfile, time, shutil
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quality"))
sys.path.insert(0, HERE)
import numpy as np, tensorvault as tv
from emb_eval import token_embeddings, recall, N_QUERIES
e = token_embeddings()
e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
rng = np.random.default_rng(0)
e = e[rng.permutation(len(e))]
q, db = e[:N_QUERIES], np.ascontiguousarray(e[N_QUERIES:])
exact = q @ db.T
tmp = tempfile.mkdtemp()
for comp in ("fp16", "int8", "int4"):
    p = os.path.join(tmp, comp + ".cvc")
    tv.pack_cvc(db, p, compression=comp, sync=False)
    d = np.asarray(tv.load_cvc(p))
    r0, r4 = recall(q, exact, d)
    ts = []
    for _ in range(7):
        t0 = time.perf_counter(); tv.load_cvc(p); ts.append(time.perf_counter() - t0)
    med = sorted(ts)[3]
    from evict import evict
    cs = []
    for _ in range(5):
        evict(p); t0 = time.perf_counter(); tv.load_cvc(p); cs.append(time.perf_counter() - t0)
    cold = sorted(cs)[2]
    print(f"tokens {db.shape} CVC {comp}: {os.path.getsize(p)*8/db.size:.3f} bits/value  recall@10 {r0:.4f}  4x rescored {r4:.4f}  "
          f"rel RMSE {np.linalg.norm(d-db)/np.linalg.norm(db):.4f}  warm load median {med*1e3:.1f} ms = {db.nbytes/med/2**30:.2f} GiB/s of f32 out; cold {cold*1e3:.1f} ms = {db.nbytes/cold/2**30:.2f} GiB/s")
shutil.rmtree(tmp)
