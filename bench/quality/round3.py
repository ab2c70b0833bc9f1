"""Quality per bit, round 3 (issue 23 items 1, 2, 6): rotation and levels, measured
through the product on held-out texts.

    target/venv/bin/python bench/quality/round3.py [--texts apache2,compound] [--tokens 1536]
        [--sections kv,ref,emb] [--entropy] [--json out.json]

Sections:

* `kv`: SmolLM2-135M's KV cache (numpy forward, `smollm.py`) on each text; per
  configuration, every `[tokens, 64]` K/V tensor goes through a `tensorvault.Store`
  (`kv_head_dim=64`, the KV layout) at one tier: bits/value (payload bytes the store
  keeps), K/V relative RMSE over the whole cache, perplexity with the whole cache at that
  tier (every layer reads its K/V back from the store). Configurations: codec v2 (the
  default until now) at tiers 1/2/3; codec v3 at tier 3 (values rotated per token,
  Lloyd-Max levels; keys per channel as v2; at tiers 1 and 2 codec v3 stores KV exactly
  as v2, which `tests/codec_v3.rs` asserts); codec v3 with keys also rotated per token
  (keys put as `kv_value`: the "rotated per token" key layout, against KVQuant's per
  channel).
* `kvcache` (issue 23 round 4): the same measurements with the cache in
  `tensorvault.KvCache` (append per head, the cache's age policy demotes every full block
  to the tier, read back): post-RoPE keys against keys stored before RoPE
  (`rope=(1e5, 64, "interleaved")`, applied at read), codec 2 against codec 4 (4-bit keys
  next to 3-bit values at tier 3), and codec 4 with `entropy=True, ecsq=True` (session 11:
  tier 3 values as 4-bit uniform codes 1.625x the MSE-optimal step apart, entropy-coded).
  `disk_bits` counts the tier slots (or, with `allocation="extent"`, the extents) the
  blocks occupy.
* `ref`: the rotated codec's choices, transcribed in numpy (not the product; same math as
  `segment_rot.rs`, docs/formats/quant.md section 10) on the values at 3 bits, keys through
  the store's tier 3: rotation on/off, Lloyd-Max vs uniform levels, RMS vs max scales.
* `emb`: recall@10 raw / 4x re-scored (`emb_eval.py`) per tier, codec v2 vs v3 vs v4
  (v4: TQTC version 4 super-block segments, `crates/tensorvault-store/src/codec_weights.rs`), on
  SmolLM2's token table (rows of 576 rotated as nine blocks of 64) and on the
  all-MiniLM-L6-v2 sentence embeddings of the passages (rows of 384: three blocks of 128;
  this set was never used to choose anything). Since session 11 codec 4 writes embeddings
  with norm-matched super-block units (docs/formats/quant.md §11.2); the layout studies
  behind that choice use the encoder alone (`examples/v4_sweep.rs`, bench/RESULTS.md
  "Session 11: quant-emb").

The held-out texts (`texts/apache2.txt`, `texts/compound.txt`, see texts/README.md) were
added for this round and never used to choose anything; gpl3 and execmodel are the texts
earlier rounds tuned on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Callable, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import tensorvault as tv  # noqa: E402
from common import text  # noqa: E402
from kv_eval import _names, cache_arrays, nll_ppl  # noqa: E402
from tvstore import LAST_ALLOCATED, codec_opts, roundtrip, set_store_opts  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- numpy transcription of the rotated segment (docs/formats/quant.md section 10) ----

def _levels(bits: int, uniform: bool) -> np.ndarray:
    from gaussian_levels import lloyd_max, uniform as uni
    return np.array(uni(bits)[0] if uniform else lloyd_max(bits), np.float32)


def _signs(seed: int, b: int) -> np.ndarray:
    from_rot = []
    m = (1 << 64) - 1
    for t in range((b + 63) // 64):
        z = (seed + (t + 1) * 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        from_rot.append(z ^ (z >> 31))
    return np.array([-1.0 if (from_rot[i // 64] >> (i % 64)) & 1 else 1.0 for i in range(b)], np.float32)


def _hadamard(b: int) -> np.ndarray:
    h = np.ones((1, 1), np.float32)
    while h.shape[0] < b:
        h = np.block([[h, h], [h, -h]])
    return h


def rotated_np(x: np.ndarray, bits: int, rotate: bool, uniform: bool, rms: bool,
               b: int = 64, sink: bool = True, seed: int = 0x54565133, norm: bool = False) -> np.ndarray:
    """Round-trip `x` [tokens, b] (one block per token) as the v3 segment would."""
    x = x.astype(np.float32)
    out = np.empty_like(x)
    start = 1 if sink else 0
    out[:start] = x[:start].astype(np.float16).astype(np.float32)
    q = x[start:]
    if rotate:
        m = (_hadamard(b) * _signs(seed, b)[None, :]) / np.sqrt(b)  # y = m @ x
        y = q @ m.T
    else:
        y = q
    lv = _levels(bits, uniform)
    want = np.sqrt((y ** 2).mean(1)) if rms else np.abs(y).max(1) / lv[-1]
    base = want.max() / 2 ** (255 / 16)
    code = np.clip(np.round(16 * np.log2(np.maximum(want, 1e-38) / base)), 1, 255)
    s = np.where(want > 0, base * 2 ** (code / 16), 0.0).astype(np.float32)
    mids = (lv[1:] + lv[:-1]) / 2
    inv = np.where(s > 0, 1 / np.maximum(s, 1e-38), 0.0)[:, None]
    levels = lv[np.searchsorted(mids, y * inv, side="right")]
    if norm:
        # Norm-matched: re-pick each block's scale code so the decoded block keeps the
        # rotated block's norm (the codes stay those of the RMS scale).
        ln = np.linalg.norm(levels, axis=1)
        want2 = np.where(ln > 0, np.linalg.norm(y, axis=1) / np.maximum(ln, 1e-30), 0.0)
        code = np.clip(np.round(16 * np.log2(np.maximum(want2, 1e-38) / base)), 1, 255)
        s = np.where(want2 > 0, base * 2 ** (code / 16), 0.0).astype(np.float32)
    z = levels * s[:, None]
    out[start:] = z @ m if rotate else z
    return out


# ---- the KV section ----

class KvConfig:
    def __init__(self, label: str, tier: int, codec: int, key_kind: str = "kv_key",
                 values_np: Optional[Callable[[np.ndarray], np.ndarray]] = None,
                 entropy: bool = False) -> None:
        self.label, self.tier, self.codec, self.key_kind, self.values_np = label, tier, codec, key_kind, values_np
        self.entropy = entropy

    def roundtrip_layer(self, m, layer: int, k: np.ndarray, v: np.ndarray):
        """(decoded k, decoded v, stored bytes, values) for one layer."""
        set_store_opts(codec=self.codec, **({"entropy": True} if self.entropy else {}))
        arrays = []
        for name, a, kind in cache_arrays(m, layer, k, v):
            if kind == "kv_key":
                arrays.append((name, a, self.key_kind))
            elif self.values_np is None:
                arrays.append((name, a, kind))
        dec, stored, values = roundtrip(arrays, self.tier)
        if self.values_np is not None:
            for _, _, vn in _names(m, layer):
                h = int(vn.split(".H")[1].split(".")[0])
                dec[vn] = self.values_np(v[h])
                # bits: 3-bit codes + one scale byte per 64-value token + the f16 sink token
                stored += (v[h].size - v[h].shape[1]) * 3 // 8 + (v[h].shape[0] - 1) + v[h].shape[1] * 2 + 32
                values += v[h].size
        kk = np.stack([dec[kn] for _, kn, _ in _names(m, layer)])
        vv = np.stack([dec[vn] for _, _, vn in _names(m, layer)])
        return kk, vv, stored, values


#: `smollm.py` runs SmolLM2 from its GGUF file, whose Q/K weights llama.cpp permuted so
#: that RoPE rotates adjacent channel pairs: base 1e5, all 64 channels, interleaved.
SMOLLM2_GGUF_ROPE = (100000.0, 64, "interleaved")


class KvCacheConfig:
    """The whole cache through `tensorvault.KvCache` (the product's KV API): per layer,
    each head's keys and values are appended (keys before RoPE when `rope` is given: the
    cache applies RoPE at read), every full block is demoted to `tier` by the cache's own
    age policy (`maintain`), and the whole range is read back. bits/value = the
    collection's `stats()["payload_bytes"]` (quantized tiers plus any raw tail) * 8 /
    values; `disk` also sums the tier slots the blocks occupy (`usage` slot lengths)."""

    AGE = {1: (0, 1 << 40, 0), 2: (0, 0, 1 << 40), 3: (0, 0, 0)}

    def __init__(self, label: str, tier: int, codec: int, rope=None, entropy: bool = False,
                 allocation: str = "slot", ecsq: bool = False, ecsq_tier2: bool = False,
                 **extra) -> None:
        self.label, self.tier, self.codec, self.rope = label, tier, codec, rope
        self.entropy, self.ecsq, self.ecsq_tier2 = entropy, ecsq, ecsq_tier2
        self.allocation = allocation
        self.pre_rope = rope is not None
        self.slot_bytes = 0
        #: Further `KvCache` options (flags added after session 12, e.g. `ecsq_tier2b`).
        self.extra = extra
        #: Attribution (`--attrib`): "k" / "v" hands attention the exact (f16) keys /
        #: values instead of the round-tripped ones; `layers` limits the round trip to
        #: those layers (the others read the exact cache).
        self.exact: Optional[str] = None
        self.layers: Optional[range] = None

    def variant(self, suffix: str, exact: Optional[str] = None, layers: Optional[range] = None):
        """A copy of this configuration for attribution (label + suffix)."""
        import copy
        c = copy.copy(self)
        c.label, c.exact, c.layers = self.label + suffix, exact, layers
        return c

    def roundtrip_layer(self, m, layer: int, k: np.ndarray, v: np.ndarray):
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="tvq-kv-")
        try:
            kw = {"codec": self.codec} if self.codec != 2 else {}
            if self.rope is not None:
                kw["rope"] = self.rope
            if self.entropy:
                kw["entropy"] = True
            if self.allocation != "slot":
                kw["allocation"] = self.allocation
            if self.ecsq:
                kw["ecsq"] = True
            if self.ecsq_tier2:
                kw["ecsq_tier2"] = True
            kw.update(self.extra)
            c = tv.KvCache(d, "q", "kv", head_dim=m.hd, durability="os",
                           age_tiers=self.AGE[self.tier], **kw)
            for h in range(m.n_kv):
                c.append_batch([(layer, h, "k", k[h]), (layer, h, "v", v[h])])
            c.maintain()
            kk = np.stack([c.read(layer, h, "k") for h in range(m.n_kv)])
            vv = np.stack([c.read(layer, h, "v") for h in range(m.n_kv)])
            st = c.stats()
            c.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)
        stored = int(sum(st["payload_bytes"]))
        # What the live blocks take in the tier files: their slots, or their extents
        # (`live_bytes`; older bindings: slot lengths times blocks).
        self.slot_bytes += sum(u.get("live_bytes", u["slot_len"] * n)
                               for u, n in zip(st["usage"], st["blocks"]))
        if self.exact or self.layers is not None:
            # The exact cache as attention reads it (post-RoPE keys).
            k_exact = m.rope(k.astype(np.float32)).astype(np.float16) if self.pre_rope else k
            if self.layers is not None and layer not in self.layers:
                kk, vv = k_exact, v
            elif self.exact == "k":
                kk = k_exact
            elif self.exact == "v":
                vv = v
        return kk, vv, stored, k.size + v.size


def measure_layers(m, c, K: Dict[int, np.ndarray], V: Dict[int, np.ndarray], pre: bool):
    """Every layer's captured K/V through configuration `c` once: (squared K error, K
    energy, squared V error, V energy, stored bytes, values), errors against the f16 cache's
    post-RoPE keys. Resets `c.slot_bytes` first, so it counts this pass only (not the
    perplexity pass)."""
    ek = nk = ev = nv = 0.0
    stored = values = 0
    if hasattr(c, "slot_bytes"):
        c.slot_bytes = 0
    for l in sorted(K):
        kin = unrope(m, K[l].astype(np.float32)).astype(np.float16) if pre else K[l]
        kh, vh, st, n = c.roundtrip_layer(m, l, kin, V[l])
        stored += st
        values += n
        k32, v32 = K[l].astype(np.float32), V[l].astype(np.float32)
        ek += float(((kh.astype(np.float32) - k32) ** 2).sum()); nk += float((k32 ** 2).sum())
        ev += float(((vh.astype(np.float32) - v32) ** 2).sum()); nv += float((v32 ** 2).sum())
    return ek, nk, ev, nv, stored, values


def quant_hook(m, c, pre: bool):
    """The forward pass's KV hook that puts each layer's K/V through configuration `c`
    (keys before RoPE when `pre`, as the product's `rope=` caches keep them)."""
    def hook(layer, k, v):
        kh, vh, _, _ = c.roundtrip_layer(m, layer, k, v)
        return kh.astype(np.float16), vh.astype(np.float16)

    hook.pre_rope = pre
    return hook


def kv_section(m, texts: List[str], ntok: int, configs: List[KvConfig]) -> Dict:
    out: Dict = {}
    for name in texts:
        ids = m.encode(text(name))
        if len(ids) < ntok:
            raise SystemExit(f"text {name} has only {len(ids)} tokens, need {ntok}")
        ids = ids[:ntok]
        K: Dict[int, np.ndarray] = {}
        V: Dict[int, np.ndarray] = {}

        def cap(layer, k, v):
            K[layer], V[layer] = k, v
            return k, v

        t0 = time.time()
        ref = nll_ppl(m.forward(ids, kv_hook=cap), ids)
        log(f"== {name}: {ntok} tokens, f16-cache perplexity {ref:.3f} ({time.time() - t0:.0f}s)")
        rows = {"ppl_ref": ref, "configs": {}}
        for c in configs:
            t1 = time.time()
            pre = getattr(c, "pre_rope", False)
            ek, nk, ev, nv, stored, values = measure_layers(m, c, K, V, pre)
            slot_bytes = getattr(c, "slot_bytes", 0)
            hook = quant_hook(m, c, pre)

            ppl = nll_ppl(m.forward(ids, kv_hook=hook), ids)
            r = {"tier": c.tier, "bits": stored * 8.0 / values, "k_rrmse": (ek / nk) ** 0.5,
                 "disk_bits": slot_bytes * 8.0 / values or None,
                 "v_rrmse": (ev / nv) ** 0.5, "ppl": ppl, "ppl_change_pct": (ppl / ref - 1) * 100}
            rows["configs"][c.label] = r
            log(f"   {c.label:44s} b/v {r['bits']:.3f}  K {r['k_rrmse'] * 100:5.2f}%  "
                f"V {r['v_rrmse'] * 100:5.2f}%  ppl {ppl:.3f} ({r['ppl_change_pct']:+.2f}%)  ({time.time() - t1:.0f}s)")
        out[name] = rows
    return out


def nll_tokens(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The NLL of each of ids[1:] given its prefix (f64), as `nll_ppl` averages it."""
    lg = logits[:-1].astype(np.float64)
    mx = lg.max(-1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(-1))
    return lse - lg[np.arange(len(ids) - 1), ids[1:]]


def log_probs(logits: np.ndarray) -> np.ndarray:
    """log-softmax of the scored positions' logits (all but the last), f32 [T-1, vocab]."""
    lg = logits[:-1].astype(np.float64)
    mx = lg.max(-1, keepdims=True)
    return (lg - mx - np.log(np.exp(lg - mx).sum(-1, keepdims=True))).astype(np.float32)


def kl_tokens(ref_lp: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """KL(f16-cache distribution || quantized-cache distribution) per scored position
    (nats): a lower-variance companion of the NLL change, never negative."""
    lp = log_probs(logits)
    return (np.exp(ref_lp.astype(np.float64)) * (ref_lp.astype(np.float64) - lp)).sum(-1)


def window_offsets(n: int, size: int, max_windows: int) -> List[int]:
    """The evaluation windows of a text of `n` tokens (session 13's protocol, fixed before
    any result was seen): non-overlapping `size`-token windows from offset 0, at most
    `max_windows`; a text with a single whole window also gets the window that ends at its
    last token (offset n - size, overlapping the first)."""
    full = n // size
    if full == 0:
        raise SystemExit(f"a text of {n} tokens has no {size}-token window")
    offs = [i * size for i in range(min(full, max_windows))]
    if full == 1 and n > size:
        offs.append(n - size)
    return offs


def kv_windows_section(m, texts: List[str], size: int, max_windows: int, configs: List,
                       dump: str = "", offsets: Optional[List[int]] = None) -> Dict:
    """Every configuration on every window of every text (`window_offsets`): per window
    the f16-cache perplexity and each configuration's (bits/value, K/V error, perplexity,
    change, mean KL divergence per scored token from the f16 cache's next-token
    distribution); per text the pooled change: exp(mean NLL over all windows' scored
    tokens) against the f16 cache's pooled NLL over the same tokens, and the pooled KL. Each window is an independent
    sequence (its first token is the attention sink). `dump` writes every per-token NLL
    (npz) for the diagnosis."""
    out: Dict = {}
    arrays: Dict[str, np.ndarray] = {}
    for name in texts:
        all_ids = m.encode(text(name))
        offs = offsets or window_offsets(len(all_ids), size, max_windows)
        rows: Dict = {"tokens": int(len(all_ids)), "offsets": offs, "windows": [], "pooled": {}}
        ref_nll: List[np.ndarray] = []
        cfg_nll: Dict[str, List[np.ndarray]] = {c.label: [] for c in configs}
        cfg_kl: Dict[str, List[np.ndarray]] = {c.label: [] for c in configs}
        acc: Dict[str, List[float]] = {c.label: [0.0] * 6 for c in configs}  # ek nk ev nv stored values
        disk: Dict[str, float] = {c.label: 0.0 for c in configs}
        for off in offs:
            ids = all_ids[off:off + size]
            K: Dict[int, np.ndarray] = {}
            V: Dict[int, np.ndarray] = {}

            def cap(layer, k, v):
                K[layer], V[layer] = k, v
                return k, v

            t0 = time.time()
            ref_logits = m.forward(ids, kv_hook=cap)
            rn = nll_tokens(ref_logits, ids)
            ref_lp = log_probs(ref_logits)
            del ref_logits
            ref_nll.append(rn)
            arrays[f"{name}@{off}/ref"] = rn
            ref = float(np.exp(rn.mean()))
            win = {"offset": off, "ppl_ref": ref, "configs": {}}
            log(f"== {name} window @{off}: f16-cache perplexity {ref:.3f} ({time.time() - t0:.0f}s)")
            for c in configs:
                t1 = time.time()
                pre = getattr(c, "pre_rope", False)
                ek, nk, ev, nv, stored, values = measure_layers(m, c, K, V, pre)
                a = acc[c.label]
                for i, x in enumerate((ek, nk, ev, nv, stored, values)):
                    a[i] += x
                slot_bytes = getattr(c, "slot_bytes", 0)  # before the perplexity pass adds to it
                disk[c.label] += slot_bytes
                hook = quant_hook(m, c, pre)
                logits = m.forward(ids, kv_hook=hook)
                cn = nll_tokens(logits, ids)
                kl = kl_tokens(ref_lp, logits)
                del logits
                cfg_kl[c.label].append(kl)
                cfg_nll[c.label].append(cn)
                arrays[f"{name}@{off}/{c.label}"] = cn
                ppl = float(np.exp(cn.mean()))
                r = {"bits": stored * 8.0 / values, "disk_bits": slot_bytes * 8.0 / values or None,
                     "k_rrmse": (ek / nk) ** 0.5, "v_rrmse": (ev / nv) ** 0.5,
                     "ppl": ppl, "ppl_change_pct": (ppl / ref - 1) * 100, "kl": float(kl.mean())}
                win["configs"][c.label] = r
                log(f"   {c.label:60s} b/v {r['bits']:.3f}  K {r['k_rrmse'] * 100:5.2f}%  "
                    f"V {r['v_rrmse'] * 100:5.2f}%  ppl {ppl:.3f} ({r['ppl_change_pct']:+.2f}%)  "
                    f"KL {r['kl'] * 1e3:.3f} mnats  ({time.time() - t1:.0f}s)")
            rows["windows"].append(win)
        ref_pool = float(np.concatenate(ref_nll).mean())
        rows["ppl_ref_pooled"] = float(np.exp(ref_pool))
        for c in configs:
            ek, nk, ev, nv, stored, values = acc[c.label]
            pool = float(np.concatenate(cfg_nll[c.label]).mean())
            rows["pooled"][c.label] = {
                "bits": stored * 8.0 / values, "disk_bits": disk[c.label] * 8.0 / values or None,
                "k_rrmse": (ek / nk) ** 0.5, "v_rrmse": (ev / nv) ** 0.5,
                "ppl": float(np.exp(pool)), "ppl_change_pct": (np.exp(pool - ref_pool) - 1) * 100,
                "kl": float(np.concatenate(cfg_kl[c.label]).mean()),
                "window_changes_pct": [w["configs"][c.label]["ppl_change_pct"] for w in rows["windows"]]}
            p = rows["pooled"][c.label]
            log(f"   {name} pooled over {len(offs)} windows: {c.label:50s} {p['ppl_change_pct']:+.2f}%  "
                f"(windows {', '.join(f'{x:+.2f}' for x in p['window_changes_pct'])})")
        out[name] = rows
    if dump:
        np.savez_compressed(dump, **arrays)
    return out


def unrope(m, k: np.ndarray) -> np.ndarray:
    """Post-RoPE keys [heads, T, hd] at positions 0.. back to before RoPE (the model's
    adjacent-pair rotation undone), for the error and the K/V tables of pre-RoPE caches."""
    cos, sin = m._rope_tables(0, k.shape[1])
    a, b = k[..., 0::2], k[..., 1::2]
    out = np.empty_like(k)
    out[..., 0::2] = a * cos + b * sin
    out[..., 1::2] = -a * sin + b * cos
    return out


def emb_section(tiers: List[int], sets: List[str], codecs=("2", "3", "4"), entropy: bool = False) -> Dict:
    from emb_eval import N_QUERIES, recall, sentence_embeddings, token_embeddings, word_embeddings
    out: Dict = {}
    for set_name in sets:
        e = {"tokens": token_embeddings, "words": word_embeddings}.get(
            set_name, lambda: sentence_embeddings(log=log))()
        q, db = e[:N_QUERIES], np.ascontiguousarray(e[N_QUERIES:])
        exact = q @ db.T
        runs = [(c, False) for c in codecs] + ([(c, True) for c in codecs if c in ("2", "3")] if entropy else [])
        for codec, ent in runs:
            set_store_opts(**codec_opts(codec), **({"entropy": True} if ent else {}))
            label = f"codec v{codec}" + (" + entropy" if ent else "")
            for tier in tiers:
                t0 = time.time()
                dec, stored, values = roundtrip([(set_name, db, "embedding")], tier)
                d = dec[set_name].astype(np.float32)
                r0, r4 = recall(q, exact, d)
                r = {"bits": stored * 8.0 / values, "recall": r0, "recall_rescored": r4,
                     "rrmse": float(np.linalg.norm(d - db) / np.linalg.norm(db)),
                     "disk_bits": LAST_ALLOCATED["bytes"] * 8.0 / values}
                out[f"{set_name} {label} tier {tier}"] = r
                log(f"   {set_name} {label} tier {tier}: b/v {r['bits']:.3f} (disk {r['disk_bits']:.3f})  recall@10 {r0:.4f}  "
                    f"4x {r4:.4f}  rel RMSE {r['rrmse'] * 100:.2f}%  ({time.time() - t0:.0f}s)")
    set_store_opts()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", default="apache2,compound")
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--sections", default="kv,ref,emb")
    ap.add_argument("--emb-sets", default="tokens,sentences",
                    help="embedding sets: tokens (SmolLM2's table), sentences (all-MiniLM-L6-v2 on the passages), "
                         "words (all-MiniLM-L6-v2's word-embedding table, held out)")
    ap.add_argument("--entropy", action="store_true",
                    help="also measure collections with the entropy flag (TQTC v5, lossless: "
                         "same values, fewer payload bytes)")
    ap.add_argument("--emb-codecs", default="2,3,4",
                    help="store codecs the emb section compares (4: TQTC v4 super-block segments; "
                         "4e: codec 4 with entropy-coded levels, ecsq; x suffix: extent allocation; g suffix: per-row gains on embeddings, row_gains)")
    ap.add_argument("--windows", type=int, default=0,
                    help="kvcache: evaluate every configuration on up to N non-overlapping windows of "
                         "--tokens tokens per text (plus the window ending at the text's last token when "
                         "the text holds only one) and report per-window and pooled changes "
                         "(session 13's protocol); 0: the first --tokens tokens only")
    ap.add_argument("--attrib", action="store_true",
                    help="kvcache: instead of the configurations, their attribution variants (exact K; "
                         "V round-tripped only in layers 0-9 / 10-19 / 20-29 with exact K; for the first, "
                         "also exact V)")
    ap.add_argument("--offsets", default="",
                    help="with --windows: these window offsets instead of the protocol's (diagnosis only)")
    ap.add_argument("--dump", default="", help="with --windows: write every per-token NLL to this .npz")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    sections = set(a.sections.split(","))
    texts = a.texts.split(",")
    res: Dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}",
                 "tensorvault": getattr(tv, "__version__", "?"),
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "tokens": a.tokens}
    t0 = time.time()
    if sections & {"kv", "ref", "kvcache"}:
        from smollm import SmolLM
        m = SmolLM()
        configs: List[KvConfig] = []
        if "kv" in sections:
            configs += [KvConfig(f"codec v2 tier {t}", t, 2) for t in (1, 2, 3)]
            configs += [KvConfig("codec v3 tier 3", 3, 3),
                        KvConfig("codec v3 tier 3, keys rotated per token", 3, 3, key_kind="kv_value")]
            if a.entropy:
                configs += [KvConfig(f"codec v2 tier {t} + entropy", t, 2, entropy=True) for t in (1, 2, 3)]
        if "kvcache" in sections:
            r = SMOLLM2_GGUF_ROPE
            configs += [KvCacheConfig("KvCache codec 2 tier 2, post-RoPE keys", 2, 2),
                        KvCacheConfig("KvCache codec 2 tier 2, pre-RoPE keys", 2, 2, r),
                        KvCacheConfig("KvCache codec 2 tier 3, post-RoPE keys", 3, 2),
                        KvCacheConfig("KvCache codec 2 tier 3, pre-RoPE keys", 3, 2, r),
                        KvCacheConfig("KvCache codec 4 tier 3, post-RoPE 4-bit keys", 3, 4),
                        KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys", 3, 4, r),
                        KvCacheConfig("KvCache codec 4 tier 1, pre-RoPE keys", 1, 4, r),
                        KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys + entropy", 3, 4, r, True),
                        KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys + entropy + extents",
                                      3, 4, r, True, "extent"),
                        KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys + entropy + ecsq", 3, 4, r,
                                      True, ecsq=True),
                        KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys + entropy + ecsq + extents",
                                      3, 4, r, True, "extent", ecsq=True),
                        # Session 15: the same with extents rounded to 16 bytes, not 64.
                        KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys + entropy + ecsq + extents16",
                                      3, 4, r, True, "extent", ecsq=True, slot_align=16)]
            # Session 12 (kv-tier2): tier 2 values with entropy-coded levels (ecsq_tier2),
            # against the same collection without them, in slots and in extents.
            configs += [KvCacheConfig(f"KvCache codec 4 tier 2, pre-RoPE keys + entropy + ecsq{x}", 2, 4, r,
                                      True, alloc, ecsq=True)
                        for x, alloc in (("", "slot"), (" + extents", "extent"))]
            configs += [KvCacheConfig(f"KvCache codec 4 tier 2, pre-RoPE keys + entropy + ecsq_tier2{x}", 2, 4,
                                      r, True, alloc, ecsq=True, ecsq_tier2=True)
                        for x, alloc in (("", "slot"), (" + extents", "extent"))]
            # Session 15 (kv-chan): tier 2 keys as channel-centred model-coded ECSQ (TQTC v8,
            # flags2 bit 0) on top of session 13's best tier 2 (ecsq_tier2 + extents). The
            # suffix names the keys' budget (the first run, without it, fitted v8 into the
            # 5-bit groups' length: bench/RESULTS.md "Session 15: kv-chan").
            configs += [KvCacheConfig("KvCache codec 4 tier 2, pre-RoPE keys + entropy + ecsq_tier2 + keys_ecsq"
                                      " + extents, keys 4.95 b/v", 2, 4, r, True, "extent", ecsq=True,
                                      ecsq_tier2=True, keys_ecsq=True)]
            # Session 16 (kv-wstep): the same keys as TQTC v9, one step per channel shaped
            # by the block's RoPE-pair key energy (flags2 bit 2), in the same budget.
            configs += [KvCacheConfig("KvCache codec 4 tier 2, pre-RoPE keys + entropy + ecsq_tier2 + keys_ecsq"
                                      " + extents, keys 4.95 b/v + keys_wstep", 2, 4, r, True, "extent",
                                      ecsq=True, ecsq_tier2=True, keys_ecsq=True, keys_wstep=True)]
            # ... and at tier 3 (session 16): the keys as v9 within the bytes of their 4-bit
            # envelope (kv_keys_wstep covers tier 3; v8 there was tried and reverted in
            # session 15, RESULTS "Session 15: kv-chan" 3b).
            configs += [KvCacheConfig("KvCache codec 4 tier 3, pre-RoPE 4-bit keys + entropy + ecsq + extents"
                                      " + keys_ecsq + keys_wstep", 3, 4, r, True, "extent", ecsq=True,
                                      keys_ecsq=True, keys_wstep=True)]
        only = os.environ.get("TVQ_ONLY")
        if only:  # harness knob: a subset of the configurations by label substring
            configs = [c for c in configs if any(o in c.label for o in only.split("|"))]
        if a.attrib:  # instead of the configurations: their attribution variants
            base = [c for c in configs if isinstance(c, KvCacheConfig)]
            configs = [v for i, c in enumerate(base) for v in (
                *([c.variant(" [exact V]", exact="v")] if i == 0 else []),
                c.variant(" [exact K]", exact="k"),
                *(c.variant(f" [V only, layers {lo}-{lo + 9}]", exact="k", layers=range(lo, lo + 10))
                  for lo in (0, 10, 20)))]
        only_after = os.environ.get("TVQ_ONLY_AFTER")
        if only_after:  # the same knob, applied after --attrib made its variants
            configs = [c for c in configs if any(o in c.label for o in only_after.split("|"))]
        if "ref" in sections:
            for label, rot, uni, rms in (("V numpy: no rotation, Lloyd-Max, RMS", False, False, True),
                                         ("V numpy: rotated, uniform, RMS", True, True, True),
                                         ("V numpy: rotated, Lloyd-Max, max", True, False, False),
                                         ("V numpy: rotated, uniform, max", True, True, False)):
                configs.append(KvConfig(label, 3, 2, values_np=lambda v, r=rot, u=uni, s=rms:
                                        rotated_np(v, 3, r, u, s)))
        if a.windows:
            offs = [int(x) for x in a.offsets.split(",")] if a.offsets else None
            res["kv_windows"] = kv_windows_section(m, texts, a.tokens, a.windows, configs, a.dump, offs)
        else:
            res["kv"] = kv_section(m, texts, a.tokens, configs)
    if "emb" in sections:
        res["emb"] = emb_section([1, 2, 3], a.emb_sets.split(","),
                                 a.emb_codecs.split(","), a.entropy)
    res["seconds"] = time.time() - t0
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
