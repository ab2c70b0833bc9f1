"""numpy check (session 16): would a per-channel step shaped by the query energy help tier-2
keys? v8 codes a key block (256 tokens x 64 pre-RoPE channels) with one step per block,
which minimises the keys' MSE; attention needs the logit error q.dk, whose variance per
channel scales with the query energy of that channel's RoPE pair. Weighting the step,
step_c = step * (w_c / gm(w)) ** (-gamma / 2), trades key MSE for logit error. Rate model as
kv_keys_tread_study (Gaussian-model ECSQ, mid-rise, 8-bit alphabet, side data counted), at
the same bits per block.

w sources: "q" = the window's mean query energy per pair over the KV head's query heads (an
oracle the store does not have); "k" = the block's own mean key energy per pair (what a
store could compute); gamma 0 = v8 today.

    OPENBLAS_NUM_THREADS=1 [CFG=q:0,k:1] [KB=8] [FLOOR=1] [CLIP=1e9] \
        bench/quality/.venv/bin/python bench/quality/kv_keys_wstep_study.py \
        TEXT OFFSET BUDGET_BITS        # e.g. apache2 0 4.95

CFG lists source:gamma pairs; g:BITS is per-channel min/max groups of 128 tokens (side data
not counted). FLOOR=1 (default) never lets a channel's step go below
max|y_c| / (2^(KB-1) - 1), so the KB-bit alphabet does not clamp; FLOOR=0 shows why that
matters (at KB=8, gamma 1 then gives 6.5% logit error instead of 0.77%). CLIP bounds the
relative step to [1/CLIP, CLIP]. Logit error is over every (query, key) pair of the window,
causal mask not applied: a ranking of codecs, not attention's exact error.
"""
import sys, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import kv_keys_ecsq_study as S
from common import text
from round3 import unrope
import os
KB = int(os.environ.get("KB", "8")); CLIP = float(os.environ.get("CLIP", "1e9")); FLOOR = os.environ.get("FLOOR", "1") == "1"
BUD = 4.95  # set from argv by the entry points (this script's main, kv_keys_wstep_dppl.py)

def code(c, steps, sd):
    half = 2 ** (KB - 1)
    u = np.clip(np.floor(c / steps), -half, half - 1) + 0.5
    lo = S._ndtr((u - 0.5) * steps / sd); hi = S._ndtr((u + 0.5) * steps / sd)
    p = (1 - 2.0**KB / 32768) * np.maximum(hi - lo, 0) + 1 / 32768
    return u * steps, float(-np.log2(p).mean())

def ecsq_w(k, rel, side_bits):
    """k [T, C]; rel [C] relative step per channel."""
    mu = k.mean(0, keepdims=True); c = k - mu
    mu = mu.astype(np.float16).astype(np.float64)
    sd = np.maximum(c.std(0, keepdims=True), 1e-12)
    target = BUD - side_bits / k.size
    m = np.abs(k).max() + 1e-12
    lo_s, hi_s = 1e-7 * m, 8.0 * m
    amax = np.abs(c).max(0) / (2 ** (KB - 1) - 1) if FLOOR else 0.0
    st = lambda d: np.maximum(d * rel, amax)[None, :]
    for _ in range(40):
        mid = np.sqrt(lo_s * hi_s)
        if code(c, st(mid), sd)[1] > target: lo_s = mid
        else: hi_s = mid
    return code(c, st(hi_s), sd)[0] + mu

def pair(e):  # per-channel energies -> per-pair sums broadcast back to channels
    p = e[0::2] + e[1::2]
    out = np.empty_like(e); out[0::2] = p; out[1::2] = p
    return out

def main():
    global BUD
    text_name, off, BUD = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    from smollm import SmolLM
    m = SmolLM()
    ids = m.encode(text(text_name))[off:off+1536]
    K, Q = {}, {}
    def cap(l, k, v): K[l] = k; return k, v
    def capq(l, q): Q[l] = q
    m.forward(ids, kv_hook=cap, q_hook=capq)
    g = m.n_head // m.n_kv
    CFG = [tuple((a, float(b)) for a, b in [x.split(":")]) [0] for x in os.environ.get("CFG", "q:0,q:0.5,q:1,k:0.25,k:0.5,k:1").split(",")]
    acc = {c: [0.0] * 4 for c in CFG}
    for l in sorted(K):
        kpre = unrope(m, K[l].astype(np.float32)).astype(np.float64)
        ref = K[l].astype(np.float64)
        qe = [pair((Q[l][h*g:(h+1)*g].astype(np.float64) ** 2).mean((0, 1))) for h in range(kpre.shape[0])]
        for cfg in CFG:
            src, gam = cfg
            out = np.empty_like(kpre)
            for h in range(kpre.shape[0]):
                for t in range(0, kpre.shape[1], 256):
                    blk = kpre[h, t:t+256]
                    if src == "g":  # per-channel min/max groups of 128 tokens, gam = bits
                        out[h, t:t+256] = np.concatenate([S.groups(blk[i:i+128], int(gam)) for i in range(0, 256, 128)])
                        continue
                    w = qe[h] if src == "q" else pair((blk ** 2).mean(0))
                    w = np.maximum(w, 1e-12 * w.max())
                    rel = np.clip((w / np.exp(np.log(w).mean())) ** (-gam / 2), 1 / CLIP, CLIP)
                    side = 64 * (16 + 8) + (64 * 4 if gam else 0)  # mean f16 + side byte (+ 4-bit step code)
                    out[h, t:t+256] = ecsq_w(blk, rel, side)
            kp = m.rope(out.astype(np.float32)).astype(np.float64)
            a = acc[cfg]
            a[0] += ((kp-ref)**2).sum(); a[1] += (ref**2).sum()
            for hq in range(m.n_head):
                q = Q[l][hq].astype(np.float64)
                x = q @ ref[hq//g].T; y = q @ kp[hq//g].T
                a[2] += ((x-y)**2).sum(); a[3] += (x**2).sum()
        print("layer", l, "done", flush=True)
    for c, (e, s, el, sl) in acc.items():
        print(c, f"K {np.sqrt(e/s)*100:.3f}%  logits {np.sqrt(el/sl)*100:.3f}%", flush=True)


if __name__ == "__main__":
    main()
