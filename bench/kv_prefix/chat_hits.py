"""Hit rate of tensorvault.PrefixCache on a multi-turn chat workload (issue 24 item 6b):
8 conversations share a system prompt; each turn extends its conversation's previous
prompt by a user message and the assistant's answer (paragraphs of the committed texts
bench/quality/texts/*.txt, tokenized with SmolLM2's tokenizer); requests interleave round
robin. Each request looks its prompt up, then stores it (as a server would after the
prefill). Hit rate = prompt tokens found / full-chunk prompt tokens asked. Runs with an
unlimited budget and with half the working set's bytes. The KV values do not change hits,
so they are zeros of SmolLM2-135M's geometry (30 layers, 3 KV heads, head_dim 64).
Usage: python bench/kv_prefix/chat_hits.py [--chunk 64] [--turns 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "quality"))
from smollm import SmolLM  # noqa: E402

import tensorvault as tv  # noqa: E402

L, H, D = 30, 3, 64


def paragraphs():
    out = []
    for name in ("execmodel.txt", "gpl3.txt"):
        text = open(os.path.join(here, "..", "quality", "texts", name)).read()
        out += [p.strip() for p in text.split("\n\n") if len(p.strip()) > 200]
    return out


def run(prompts, chunk, budget):
    asked = found = 0
    with tempfile.TemporaryDirectory() as root:
        with tv.PrefixCache(root, "smol", L, H, D, chunk_tokens=chunk, budget_bytes=budget,
                            durability="os") as c:
            t0 = time.perf_counter()
            for p in prompts:
                full = len(p) // chunk * chunk
                asked += full
                found += c.lookup(p)
                z = [np.zeros((H, len(p), D), np.float16)] * L
                c.store(p, z, z)
            s = c.stats()
            dt = time.perf_counter() - t0
    return found / asked, s, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--conversations", type=int, default=8)
    args = ap.parse_args()
    m = SmolLM()
    paras = paragraphs()
    system = m.encode("You are a helpful assistant who answers questions about licences and Python.\n" + paras[0])
    convs = [list(system) for _ in range(args.conversations)]
    prompts = []
    k = 1
    for turn in range(args.turns):
        for c in range(args.conversations):
            user = m.encode(f"\nUser: {paras[k % len(paras)][:400]}\nAssistant:")
            answer = m.encode(" " + paras[(k + 7) % len(paras)][:400])
            k += 1
            convs[c] += list(user)
            prompts.append(np.array(convs[c], dtype=np.int64))
            convs[c] += list(answer)
    distinct = set()
    for p in prompts:
        full = len(p) // args.chunk * args.chunk
        for i in range(args.chunk, full + 1, args.chunk):
            distinct.add(hash(tuple(p[:i])))
    chunk_bytes = 2 * L * H * args.chunk * D * 2
    ws = len(distinct) * chunk_bytes
    print(f"{len(prompts)} requests, {args.conversations} conversations x {args.turns} turns, "
          f"prompts {min(map(len, prompts))}..{max(map(len, prompts))} tokens, chunk {args.chunk}, "
          f"working set {len(distinct)} chunks = {ws / 1e6:.1f} MB of f16 KV")
    print("| budget | hit rate | chunks kept | evicted | time |")
    print("|---|---|---|---|---|")
    for name, budget in (("unlimited", None), ("half the working set", ws // 2)):
        rate, s, dt = run(prompts, args.chunk, budget)
        print(f"| {name} | {rate * 100:.1f}% | {s['chunks']} | {s['evicted_chunks']} | {dt:.1f} s |")


if __name__ == "__main__":
    main()
