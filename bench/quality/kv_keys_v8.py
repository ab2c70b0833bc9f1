"""Codec against codec on real keys (session 15, kv-chan): TQTC v8 (channel-centred
model-coded ECSQ) against the segment a codec-4 KV cache stores for a tier-2 key block
today (5-bit per-channel groups of 128 tokens in the v5 envelope), v8 held to today's
byte length block by block. Same capture as `kv_keys_ecsq_study.py`: one window of one
text, every layer's keys (SmolLM2-135M-Instruct in numpy), stored before RoPE in f16 as
`KvCache(rope=...)` stores them, cut into the store's blocks of 256 tokens per KV head
(token 0 of block 0 kept as f16, the sink).

The coding is done by the Rust example `v8_keys` (this script writes the keys as .npy,
runs it, reads its decodings back). Errors are relative RMSE of the keys after RoPE (K)
and of the attention logits q.k over every query head, against the f16 cache's
post-RoPE keys.

    cargo build --release -p tensorvault-quant --example v8_keys
    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_keys_v8.py \
        --text apache2 --offset 0 [--tokens 1536] [--bits 10] [--lanes 2] \
        [--centibits 495] [--gamma 0.5,1,1.5]

Session 16 (kv-wstep): the example also codes every block as TQTC v9 (one step per
channel, shaped by the block's RoPE-pair key energy to the power -gamma/2) in v8's budget;
`--centibits 495` gives both the store's `kv_keys_ecsq` budget (max(4.95 b/v, today's
length)) instead of today's length.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import text  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def pre_rope(m, k: np.ndarray) -> np.ndarray:
    """Post-RoPE keys [heads, T, hd] at positions 0.. back to before RoPE: `round3.unrope`
    (not imported: round3 needs the tensorvault package, which this study does not)."""
    cos, sin = m._rope_tables(0, k.shape[1])
    a, b = k[..., 0::2], k[..., 1::2]
    return np.stack([a * cos + b * sin, -a * sin + b * cos], axis=-1).reshape(k.shape)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="apache2")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--bits", default="10", help="v8 code widths, comma-separated")
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--today-bits", type=int, default=5,
                    help="today's key groups: 5 bits (tier 2) or 4 (tier 3)")
    ap.add_argument("--centibits", type=int, default=None,
                    help="v8/v9 budget: max(C/100 b/v, today's length), as the store's kv_keys_ecsq")
    ap.add_argument("--gamma", default="1", help="v9 step-shaping exponents, comma-separated")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "examples", "v8_keys"))
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    ids = m.encode(text(a.text))[a.offset:a.offset + a.tokens]
    K, Q = {}, {}

    def cap(layer, k, v):
        K[layer] = k
        return k, v

    def capq(layer, q):
        Q[layer] = q

    t0 = time.time()
    m.forward(ids, kv_hook=cap, q_hook=capq)
    print(f"reference forward {time.time() - t0:.0f}s", file=sys.stderr)
    g = m.n_head // m.n_kv
    with tempfile.TemporaryDirectory(prefix="tv-v8keys-") as d:
        files = []
        for l in sorted(K):
            pre = pre_rope(m, K[l].astype(np.float32)).astype(np.float16).astype(np.float32)
            f = os.path.join(d, f"layer{l:02d}.npy")
            np.save(f, np.ascontiguousarray(pre))
            files.append(f)
        print(f"{a.text} @{a.offset}, {len(ids)} tokens, tier-2 key blocks of 256 tokens:")
        for bits, gamma in [(b, g) for b in a.bits.split(",") for g in a.gamma.split(",")]:
            opts = ["--today-bits", str(a.today_bits), "--gamma", gamma]
            if a.centibits is not None:
                opts += ["--centibits", str(a.centibits)]
            out = subprocess.run([a.bin, *opts, bits, str(a.lanes), d, *files],
                                 check=True,
                                 capture_output=True, text=True).stdout
            print(out.rstrip())
            acc = {n: [0.0, 0.0, 0.0, 0.0] for n in ("today", "v8", "v9")}
            for l in sorted(K):
                ref = K[l].astype(np.float64)
                for n in acc:
                    kh = np.load(os.path.join(d, f"layer{l:02d}.{n}.npy"))
                    post = m.rope(kh.astype(np.float32)).astype(np.float64)
                    acc[n][0] += float(((post - ref) ** 2).sum())
                    acc[n][1] += float((ref ** 2).sum())
                    for hq in range(m.n_head):
                        q = Q[l][hq].astype(np.float64)
                        s_ref = q @ ref[hq // g].T
                        s_q = q @ post[hq // g].T
                        acc[n][2] += float(((s_q - s_ref) ** 2).sum())
                        acc[n][3] += float((s_ref ** 2).sum())
            for n, (e, s, el, sl) in acc.items():
                print(f"  {n:6s} k={bits:>2} g={gamma}  K rel. RMSE {np.sqrt(e / s) * 100:.3f}%   "
                      f"logits rel. RMSE {np.sqrt(el / sl) * 100:.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
