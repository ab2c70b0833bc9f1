"""numpy check (session 16): dPPL and KL of one window with only the keys quantized (values
f16 exact), per layout of kv_keys_wstep_study.py: 4-bit or 5-bit per-channel groups of 128
tokens ("g:BITS"), v8's one step per block ("q:0"), per-channel steps from the block's
RoPE-pair energy ("k:GAMMA"), at BUDGET bits per value for the ECSQ layouts. Pre-RoPE keys
in blocks of 256 tokens per KV head, token 0 kept exact (the sink row). Whole window at
once, every layer reading its quantized keys (errors compound as in round3's kvcache
section, but values are exact: this isolates the keys).

    OPENBLAS_NUM_THREADS=1 CFG=g:4,q:0,k:1 bench/quality/.venv/bin/python \
        bench/quality/kv_keys_wstep_dppl.py TEXT OFFSET BUDGET    # e.g. apache2 679 3.83
"""
import os, sys, numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
TEXT, OFF, BUD = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
import kv_keys_ecsq_study as S
from common import text
from smollm import SmolLM
import kv_keys_wstep_study as W  # the block coder (its capture runs only as a script)
W.BUD = BUD
code, ecsq_w, pair = W.code, W.ecsq_w, W.pair

def quant_block(blk, src, gam):
    if src == "g":
        return np.concatenate([S.groups(blk[i:i+128], int(gam)) for i in range(0, len(blk), 128)])
    if src == "q" and gam == 0:
        rel = np.ones(blk.shape[1])
    else:
        w = pair((blk ** 2).mean(0)); w = np.maximum(w, 1e-12 * w.max())
        rel = (w / np.exp(np.log(w).mean())) ** (-gam / 2)
    side = 64 * 24 + (64 * 4 if gam else 0)
    return ecsq_w(blk, rel, side)

m = SmolLM()
ids = m.encode(text(TEXT))[OFF:OFF+1536]

def nll(logits):
    lg = logits[:-1].astype(np.float64)
    mx = lg.max(-1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(-1))
    return lse - lg[np.arange(len(ids) - 1), ids[1:]], lg - lse[:, None]

ref_nll, ref_lp = nll(m.forward(ids))
for cfg in os.environ.get("CFG", "g:4,q:0,k:1").split(","):
    src, gam = cfg.split(":"); gam = float(gam)
    def hook(layer, k, v):
        kp = k.astype(np.float64)
        out = np.empty_like(kp)
        for h in range(kp.shape[0]):
            for t in range(0, kp.shape[1], 256):
                out[h, t:t+256] = quant_block(kp[h, t:t+256], src, gam)
        out[:, 0] = kp[:, 0]
        return m.rope(out.astype(np.float32)).astype(np.float16), v
    hook.pre_rope = True
    q_nll, q_lp = nll(m.forward(ids, kv_hook=hook))
    kl = float((np.exp(ref_lp) * (ref_lp - q_lp)).sum(-1).mean()) * 1000
    d = (np.exp(q_nll.mean() - ref_nll.mean()) - 1) * 100
    worst = np.argsort(q_nll - ref_nll)[-3:][::-1]
    print(f"{TEXT}@{OFF} {cfg} budget {BUD}: dPPL {d:+.2f}%  KL {kl:.2f} mnats  worst tokens",
          [(int(i), round(float(q_nll[i] - ref_nll[i]), 2)) for i in worst], flush=True)
