"""The quality harness of issue 14: real tensors through the store's tiers, one table.

    bash bench/quality/run.sh [--quick] [--sections kv,e2e,weights,emb] [--json out.json]

Sections (see each module's docstring for the method):
  kv       SmolLM2-135M KV cache per tier: K/V relative RMSE, attention-output cosine,
           perplexity with the whole cache at that tier, on each text (kv_eval.py)
  e2e      a decode run whose cache lives in the store's KV API (e2e.py)
  weights  every all-MiniLM-L6-v2 weight matrix per tier vs GGUF quantizers (weights_eval.py)
  emb      recall@10 on sentence embeddings and SmolLM2's token table (emb_eval.py)
--quick: 1024 tokens of one text, no tier-0 perplexity pass, 6000 passages.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import tensorvault as tv  # noqa: E402
from common import TEXTS, text  # noqa: E402
from report import render  # noqa: E402
from tvstore import disable_kinds, kinds_supported  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sections", default="kv,e2e,weights,emb")
    ap.add_argument("--tokens", type=int, default=0, help="tokens per text (default 1536, quick 1024)")
    ap.add_argument("--e2e-tokens", type=int, default=2048)
    ap.add_argument("--json", default="", help="also write the raw results here")
    ap.add_argument("--label", default="", help="name of this run in the table title")
    ap.add_argument("--no-kinds", action="store_true", help="never pass kind= (the generic codec)")
    a = ap.parse_args()
    sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    tiers = [1, 2, 3] if a.quick else [0, 1, 2, 3]
    ntok = a.tokens or (1024 if a.quick else 1536)
    if a.no_kinds:
        disable_kinds()
    kinds = kinds_supported()
    res = {
        "label": a.label or ("kind=... per tensor" if kinds else
                             "no kind= passed" if a.no_kinds else "codec v1 (no kind= in the binding)"),
        "kinds": kinds,
        "tensorvault": tv.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}",
        "quick": a.quick,
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    t0 = time.time()
    log(f"tensorvault {tv.__version__}; kind= supported: {kinds}")
    m = None
    if "kv" in sections or "e2e" in sections:
        from smollm import SmolLM

        m = SmolLM()
    if "kv" in sections:
        from kv_eval import evaluate_text

        res["kv"] = {}
        for name in TEXTS[:1] if a.quick else TEXTS:
            ids = m.encode(text(name))
            if len(ids) < ntok:
                raise SystemExit(f"text {name} has only {len(ids)} tokens, need {ntok}")
            log(f"== KV cache, text {name} ({ntok} of {len(ids)} tokens)")
            res["kv"][name] = evaluate_text(m, ids[:ntok], tiers, log=log)
    if "e2e" in sections:
        from e2e import evaluate as e2e_eval

        log(f"== end to end: decode with the cache in the store's KV API ({a.e2e_tokens} tokens)")
        ids = m.encode(text(TEXTS[0]))[: a.e2e_tokens]
        res["e2e"] = e2e_eval(m, ids, log=log)
    m = None
    if "weights" in sections:
        from weights_eval import evaluate as w_eval

        log("== weights: all-MiniLM-L6-v2")
        res["weights"] = w_eval(tiers, log=log)
    if "emb" in sections:
        from emb_eval import evaluate as e_eval

        log("== embeddings: recall@10")
        res["emb"] = e_eval(tiers, quick=a.quick, log=log)
    res["seconds"] = round(time.time() - t0, 1)
    print(render(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
