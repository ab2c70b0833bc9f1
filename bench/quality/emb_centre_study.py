"""numpy study (session 14): what it takes for raw recall@10 on SmolLM2's token table to
reach .98 / .95 / .85 at tiers 1 / 2 / 3 (issue 23 item 6). Three levers, alone and together:

* **model-coded ECSQ** (`ecsq_p`): the ECSQ of session 12 (rotated 1024-value blocks, one
  uniform step per 4096-value block under rate control, rANS) but with no frequency table:
  the code frequencies come from a discretised Gaussian whose std is each 1024-value
  sub-block's RMS (one byte of side data per sub-block, as today), counts floored at 1 in
  2^15 so every code is codable. The table costs 0.5-0.8 b/v at tier 1 (256 symbols) and
  0.1-0.2 at tier 2; without it the alphabet can also grow (10 / 7 / 6 bits at tiers 1 / 2 / 3)
  so that the rate control, not the alphabet, sets the step. Bytes: 43 header + 2 model + 4
  state + the codes' cross-entropy under the model rounded up to 16-bit words + 4 scale bytes
  (+ 10 + one gain byte per row part with gains). `--table` uses the product's v5 model
  instead (`emb_recall_study.ecsq`, 8 / 6 / 5-bit alphabets; `--table-bits 2:7` to widen);
* **centring**: the table's mean row (44% of its energy) subtracted before coding, added
  after (one f32 row per tensor);
* **row gains** (session 13's v6 envelope: one byte per row part, `1 + (c - 128) / 2048`);
  `--fullg` computes the gain of a centred row against the *original* row,
  `<x, m + g c_hat> = |x|^2`, instead of the centred row's `<c, g c_hat> = |c|^2`.

The last, short block is padded with the table's first rows (the product codes a short
block as it is; zero padding breaks this model's rate control for that one block).

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/emb_centre_study.py \
        [--sets tokens,words] [--tiers 1,2,3] [--only 00,01,10,11] [--fullg] [--table] [--spectrum]

`--only CG`: C = centred, G = gains (default: all four combinations).
"""
import sys, types, time, argparse
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.modules.setdefault("tensorvault", types.ModuleType("tensorvault"))
import emb_recall_study as S
from emb_eval import recall, token_embeddings, word_embeddings


def ndtr(x):
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-z * z)
    with np.errstate(invalid="ignore"):
        r = 0.5 * (1.0 + np.sign(x) * y)
    return np.where(np.isinf(x), (x > 0).astype(float), r)

M = 1 << 15

def param_bytes(u, k, s, sig):
    """bytes of codes u (nb, BLOCK) under a discretised Gaussian with std sig (nb, BLOCK)
    in units of step s (nb,1): counts floor 1, precision M."""
    half = (2 ** k - 1) / 2
    nb = len(u)
    # per block, per sub-block sigma -> evaluate model per (value) directly
    # probabilities per symbol depend on sig/s; group values by sub-block (1024)
    tot = np.zeros(nb)
    sub = u.shape[1] // 1024
    j = np.arange(2 ** k)
    for b in range(sub):
        uu = u[:, b*1024:(b+1)*1024]
        r = (s[:, 0] / sig[:, b*1024])[:, None]  # step in sigmas
        hi = np.where(j == 2**k - 1, np.inf, (j - half + 0.5))[None, :] * r
        lo = np.where(j == 0, -np.inf, (j - half - 0.5))[None, :] * r
        p = ndtr(hi) - ndtr(lo)
        f = np.maximum(1, np.round(p * M))
        lp = np.log2(f) - np.log2(f.sum(1, keepdims=True))
        tot += -np.take_along_axis(lp, uu, 1).sum(1)
    return 43 + 2 + 4 + np.ceil(tot / 16) * 2

def ecsq_p(y, ref, sig, side, k, slot, it=24):
    half = (2 ** k - 1) / 2
    def q(t):
        s = ref * 2.0 ** t
        u = np.clip(np.floor(y / s + half + 0.5), 0, 2 ** k - 1)
        return u.astype(np.int64), (u - half) * s, s
    top = (np.abs(y) / ref).max(1, keepdims=True)
    lo = np.log2(np.maximum(top / half, 1e-30)) - 0.0
    lo = lo - 3  # allow clipping: the model prices clipped tails
    hi = lo * 0 + 6.0
    for _ in range(it):
        mid = (lo + hi) / 2
        u, _, s = q(mid)
        ok = (side + param_bytes(u, k, s, sig) <= slot)[:, None]
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    u, yq, s = q(hi)
    return yq, side + param_bytes(u, k, s, sig)

def run(db, tier, k, centred, gain, mean):
    n, d = db.shape
    x = db - mean if centred else db
    flat = x.reshape(-1)
    pad = (-len(flat)) % S.BLOCK
    flat = np.concatenate([flat, flat[:pad]])  # pad with real rows (the product codes a short last block)
    nb = len(flat) // S.BLOCK
    y = S.rotate(flat, 1024).reshape(nb, S.BLOCK).astype(np.float64)
    ref = np.sqrt((y ** 2).mean(1, keepdims=True))
    sub = np.sqrt((y.reshape(nb, 4, 1024) ** 2).mean(2))
    sub = (np.round(sub / ref * 64).clip(1, 255) / 64) * ref  # 1 byte per 1024
    sig = np.repeat(sub, 1024, axis=1)
    side = np.full(nb, 4.0)
    if gain:
        side = side + 10 + S.parts_of(nb, d)
    if TABLE:  # the product's v5 ECSQ: per-block frequency table, 8/6/5-bit alphabets
        yq, by = S.ecsq(y.astype(np.float32), ref, side, S.BITS[tier], S.SLOT[tier])
    else:
        yq, by = ecsq_p(y, ref, sig, side, k, S.SLOT[tier])
    out = S.rotate(yq.reshape(-1).astype(np.float32), 1024, inverse=True)
    if gain:
        ref = flat
        if centred and FULLG:  # the original rows: <x, m + g c_hat> = |x|^2
            mf = np.tile(mean, n)
            ref = flat + np.concatenate([mf, mf[:pad]])
        out = S.apply_gains(ref, flat, out, nb, d, 1)
    dec = out[: n * d].reshape(n, d)
    if centred:
        dec = dec + mean
    return dec, float(by.sum() * 8 / (n * d))


FULLG = False  # --fullg
TABLE = False  # --table


def main() -> int:
    global FULLG, TABLE
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="tokens")
    ap.add_argument("--tiers", default="1,2,3")
    ap.add_argument("--k", default="1:10,2:7,3:6")
    ap.add_argument("--fullg", action="store_true")
    ap.add_argument("--spectrum", action="store_true", help="print the coding gains a per-tensor transform could add, then exit")
    ap.add_argument("--only", default="")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--table-bits", default="")
    a = ap.parse_args()
    FULLG = a.fullg
    TABLE = a.table
    for p in filter(None, a.table_bits.split(',')):
        S.BITS[int(p.split(':')[0])] = int(p.split(':')[1])
    K = {int(t): int(v) for t, v in (p.split(":") for p in a.k.split(","))}
    for sname in a.sets.split(","):
        e = token_embeddings() if sname == "tokens" else word_embeddings()
        q, db = e[:1000], np.ascontiguousarray(e[1000:])
        if a.spectrum:  # rate a transform saves at high rate: 0.5 log2(AM / GM of the variances)
            c = db.astype(np.float64) - db.mean(0)
            v = c.var(0)
            ev = np.clip(np.linalg.eigvalsh(c.T @ c / len(c)), 1e-12, None)
            g = lambda w: 0.5 * np.log2(w.mean() / np.exp(np.log(w).mean()))
            share = len(db) * float((db.mean(0).astype(np.float64) ** 2).sum()) / float((db.astype(np.float64) ** 2).sum())
            print(f"{sname}: mean row {share:.1%} of the energy; after centring, per-dimension scaling saves {g(v):.3f} b/v, a KLT {g(ev):.3f} b/v")
            continue
        exact = q @ db.T
        mean = db.mean(0).astype(np.float32)
        for tier in map(int, a.tiers.split(",")):
            for centred in (False, True):
                for gain in (False, True):
                    if a.only and f"{int(centred)}{int(gain)}" not in a.only.split(","):
                        continue
                    t0 = time.time()
                    dec, bv = run(db, tier, K[tier], centred, gain, mean)
                    err = float(np.linalg.norm(dec - db) / np.linalg.norm(db))
                    r0, r4 = recall(q, exact, dec)
                    print(f"{sname} t{tier} k{K[tier]} centred={centred:d} gain={gain:d}: b/v {bv:.3f} err {err*100:.3f}% recall {r0:.4f} 4x {r4:.4f} ({time.time()-t0:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
