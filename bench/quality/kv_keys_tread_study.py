"""numpy check (session 15): does v8's mid-rise quantizer explain tier 3's apache2 @679
outlier (RESULTS "Session 15: kv-chan", section 3b)? One window of apache2, every layer's
pre-RoPE keys in the KV store's blocks of 256 tokens x 64 channels, coded three ways at
the same bits: per-channel asymmetric groups of 128 tokens (`GROUP_BITS`, side data not
counted), and channel-centred model-coded ECSQ (f16 mean + side byte per channel counted,
one step per block, 8-bit alphabet clamped, 2^15 tables with a floor count of 1, as v8)
with a mid-tread and with a mid-rise quantizer. Prints K and attention-logit relative
RMSE and the three worst (layer, query head) logit errors.

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_keys_tread_study.py \
        OFFSET BUDGET_BITS GROUP_BITS        # e.g. 679 3.83 4
"""
import sys, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import kv_keys_ecsq_study as S
from common import text
from round3 import unrope
OFF = int(sys.argv[1]); BUD = float(sys.argv[2]); GB = int(sys.argv[3])

def ecsq_bits(k, step, rise, kb=8):
    mu = k.mean(0, keepdims=True); c = k - mu
    mu = mu.astype(np.float16).astype(np.float64)
    sd = np.maximum(c.std(0, keepdims=True), 1e-12)
    half = 2 ** (kb - 1)
    if rise:
        u = np.clip(np.floor(c / step), -half, half - 1) + 0.5
    else:
        u = np.clip(np.round(c / step), -half + 1, half - 1)
    lo = S._ndtr((u - 0.5) * step / sd); hi = S._ndtr((u + 0.5) * step / sd)
    p = (1 - 2.0**kb / 32768) * np.maximum(hi - lo, 0) + 1 / 32768
    return u * step + mu, float(-np.log2(p).mean())

def ecsq(k, budget, rise):
    target = budget - 24 / k.shape[0]
    lo_s, hi_s = 1e-6 * (np.abs(k).max() + 1e-12), 4.0 * (np.abs(k).max() + 1e-12)
    for _ in range(40):
        mid = np.sqrt(lo_s * hi_s)
        if ecsq_bits(k, mid, rise)[1] > target: lo_s = mid
        else: hi_s = mid
    return ecsq_bits(k, hi_s, rise)[0]

def groups(k, bits, g=128):
    out = np.empty_like(k)
    for t in range(0, k.shape[0], g):
        out[t:t+g] = S.groups(k[t:t+g], bits)
    return out

from smollm import SmolLM
m = SmolLM()
ids = m.encode(text("apache2"))[OFF:OFF+1536]
K, Q = {}, {}
def cap(l, k, v): K[l] = k; return k, v
def capq(l, q): Q[l] = q
m.forward(ids, kv_hook=cap, q_hook=capq)
g = m.n_head // m.n_kv
names = ("groups", "tread", "rise")
acc = {n: [0.0] * 4 for n in names}
worst = {n: [] for n in names}
for l in sorted(K):
    kpre = unrope(m, K[l].astype(np.float32)).astype(np.float64)
    out = {n: np.empty_like(kpre) for n in names}
    for h in range(kpre.shape[0]):
        for t in range(0, kpre.shape[1], 256):
            blk = kpre[h, t:t+256]
            out["groups"][h, t:t+256] = groups(blk, GB)
            out["tread"][h, t:t+256] = ecsq(blk, BUD, False)
            out["rise"][h, t:t+256] = ecsq(blk, BUD, True)
    ref = K[l].astype(np.float64)
    for n, kh in out.items():
        kp = m.rope(kh.astype(np.float32)).astype(np.float64)
        acc[n][0] += ((kp-ref)**2).sum(); acc[n][1] += (ref**2).sum()
        for hq in range(m.n_head):
            q = Q[l][hq].astype(np.float64)
            a = q @ ref[hq//g].T; b = q @ kp[hq//g].T
            e, s = ((a-b)**2).sum(), (a**2).sum()
            acc[n][2] += e; acc[n][3] += s
            worst[n].append((np.sqrt(e/s), l, hq))
for n, (e, s, el, sl) in acc.items():
    w = sorted(worst[n], reverse=True)[:3]
    print(n, f"K {np.sqrt(e/s)*100:.3f}%  logits {np.sqrt(el/sl)*100:.3f}%  worst heads", [(round(x*100,2), l, h) for x,l,h in w])
