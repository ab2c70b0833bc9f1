"""The harness's printed report: the issue's goals table with measured figures, then the
detail tables. Works on the in-memory results and on a reloaded JSON (string keys)."""

from __future__ import annotations

from typing import Dict, List, Optional

GOALS = {
    1: ("<= 8.25", "<= +0.3%", "<= 1.5% / 1.5%", ">= 0.98 / >= 0.995", "<= GGUF Q8_0"),
    2: ("<= 5.25", "<= +1%", "<= 3% / 5%", ">= 0.95 / >= 0.99", "<= GGUF Q5_1 (Q5_K)"),
    3: ("<= 3.5", "<= +5%", "-", ">= 0.85 / >= 0.98", "<= GGUF Q3_K (else vs Q4_0)"),
}
REF = {1: ["Q8_0"], 2: ["Q5_1", "Q5_K"], 3: ["Q3_K", "Q4_0"]}


def _t(d: Optional[Dict], tier: int) -> Optional[Dict]:
    if not d:
        return None
    return d.get(tier, d.get(str(tier)))


def _pct(x: Optional[float], digits: int = 2, sign: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.{digits}f}%" if sign else f"{x * 100:.{digits}f}%"


def _table(head: List[str], rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _bits(res: Dict, tier: int) -> str:
    parts = []
    for text, r in (res.get("kv") or {}).items():
        t = _t(r["tiers"], tier)
        if t:
            parts.append(f"KV {t['bits']:.2f}")
            break
    w = _t((res.get("weights") or {}).get("tiers"), tier)
    if w:
        parts.append(f"W {w['bits']:.2f}")
    e = _t(((res.get("emb") or {}).get("sentences") or {}).get("tiers"), tier)
    if e:
        parts.append(f"E {e['bits']:.2f}")
    return " / ".join(parts) or "-"


def summary(res: Dict) -> str:
    texts = list((res.get("kv") or {}).keys())
    head = ["tier", "bits/value (KV / W / E)", "KV ppl change (" + ", ".join(texts) + ")",
            "K / V rel. RMSE", "attn-out cosine", "recall@10 raw / 4x: sentences; tokens",
            "weights rel. RMSE (GGUF ref)"]
    rows = []
    for tier in (0, 1, 2, 3):
        kvs = [_t(res["kv"][x]["tiers"], tier) for x in texts]
        if not any(kvs) and not _t((res.get("weights") or {}).get("tiers"), tier):
            continue
        ppl = ", ".join(_pct(k.get("ppl_change_pct"), 2, sign=True) if k else "-" for k in kvs)
        kv = " ; ".join(f"{k['k_rrmse'] * 100:.2f}% / {k['v_rrmse'] * 100:.2f}%" for k in kvs if k) or "-"
        cos = " ; ".join(f"{k['attn_cos_mean']:.5f}" for k in kvs if k and "attn_cos_mean" in k) or "-"
        rec = []
        for s in ("sentences", "tokens"):
            e = _t(((res.get("emb") or {}).get(s) or {}).get("tiers"), tier)
            rec.append(f"{e['recall']:.3f} / {e['recall_rescored']:.3f}" if e else "-")
        w = _t((res.get("weights") or {}).get("tiers"), tier)
        ws = "-"
        if w:
            refs = [f"{q} {res['weights']['gguf'][q]['rrmse'] * 100:.2f}%" for q in REF.get(tier, [])
                    if q in res["weights"].get("gguf", {})]
            ws = f"{w['rrmse'] * 100:.2f}%" + (f" ({', '.join(refs)})" if refs else "")
        rows.append([str(tier), _bits(res, tier), ppl, kv, cos, "; ".join(rec), ws])
    goals = _table(["tier", "bits/value", "KV perplexity change", "K / V rel. RMSE",
                    "recall@10 raw / 4x", "weights rel. RMSE"],
                   [[str(t)] + list(g) for t, g in GOALS.items()])
    return _table(head, rows) + "\n\nGoals (issue 14):\n\n" + goals


def details(res: Dict) -> str:
    out = []
    for text, r in (res.get("kv") or {}).items():
        rows = []
        for tier in (0, 1, 2, 3):
            t = _t(r["tiers"], tier)
            if not t:
                continue
            rows.append([str(tier), f"{t['bits']:.3f}", _pct(t["k_rrmse"]), _pct(t["v_rrmse"]),
                         f"{t.get('attn_cos_mean', float('nan')):.5f}", f"{t.get('attn_cos_p1', float('nan')):.4f}",
                         f"{t['ppl']:.3f}" if "ppl" in t else "-",
                         _pct(t.get("ppl_change_pct"), 2, sign=True)])
        d = r.get("demoted_1_to_3")
        if d:
            rows.append(["1->2->3 (migrate)", f"{d['bits']:.3f}", _pct(d["k_rrmse"]), _pct(d["v_rrmse"]),
                         "-", "-", "-", "-"])
        out.append(f"KV cache, text `{text}`, {r['tokens']} tokens, f16-cache perplexity {r['ppl_ref']:.3f}:\n\n"
                   + _table(["tier", "bits/value", "K rel. RMSE", "V rel. RMSE", "attn cos mean",
                             "attn cos p1", "perplexity", "change"], rows))
    e2e = res.get("e2e")
    if e2e:
        if e2e.get("pending"):
            out.append(f"End to end (decode with the cache in the store's KV API): pending: {e2e['pending']}")
        else:
            out.append("End to end (decode with the cache in the store's KV API):\n\n" + _table(
                ["tokens", "f16-cache ppl", "store-cache ppl", "change", "bytes on disk (du)",
                 "apparent file bytes", "f16 cache bytes", "ratio (du)", "blocks per tier", "policy"],
                [[str(e2e["tokens"]), f"{e2e['ppl_ref']:.3f}", f"{e2e['ppl']:.3f}",
                  _pct(e2e["ppl_change_pct"], 2, sign=True), str(e2e["disk_bytes"]),
                  str(e2e.get("apparent_bytes", "-")), str(e2e["f16_bytes"]),
                  f"{e2e['disk_bytes'] / e2e['f16_bytes'] * 100:.1f}%", str(e2e.get("tier_blocks", "-")),
                  str(e2e.get("policy", "-"))]])
                + ("\n\n" + e2e["note"] if e2e.get("note") else ""))
    w = res.get("weights")
    if w:
        rows = []
        for tier in (0, 1, 2, 3):
            t = _t(w["tiers"], tier)
            if t:
                rows.append([f"store tier {tier}", f"{t['bits']:.3f}", _pct(t["rrmse"], 3), _pct(t["rrmse_median"], 3)])
        for q, t in sorted(w["gguf"].items(), key=lambda kv: -kv[1]["bits"]):
            rows.append([f"GGUF {q}", f"{t['bits']:.4f}", _pct(t["rrmse"], 3), _pct(t["rrmse_median"], 3)])
        out.append(f"Weights: all-MiniLM-L6-v2, {w['matrices']} matrices, {w['values'] / 1e6:.1f}M values:\n\n"
                   + _table(["codec", "bits/value", "rel. RMSE (all)", "median matrix"], rows)
                   + (f"\n\nk-quants not measured: {w['kquant_missing']}" if w.get("kquant_missing") else ""))
    emb = res.get("emb")
    if emb:
        for s, r in emb.items():
            rows = []
            for tier in (0, 1, 2, 3):
                t = _t(r["tiers"], tier)
                if t:
                    rows.append([f"store tier {tier}", f"{t['bits']:.3f}", f"{t['recall']:.4f}", f"{t['recall_rescored']:.4f}"])
            for c, t in r["cvc"].items():
                rows.append([f"CVC {c}", f"{t['bits']:.3f}", f"{t['recall']:.4f}", f"{t['recall_rescored']:.4f}"])
            out.append(f"Embeddings `{s}`: {r['rows']} x {r['dim']} database, 1000 f32 queries:\n\n"
                       + _table(["codec", "bits/value", "recall@10", "4x re-scored"], rows))
    return "\n\n".join(out)


def render(res: Dict) -> str:
    head = (f"## Quality per bit: {res['label']}\n\ntensorvault {res['tensorvault']}; {res['machine']}; "
            f"{'--quick; ' if res.get('quick') else ''}{res['started']}; {res.get('seconds', '?')} s.\n\n")
    return head + summary(res) + "\n\n" + details(res) + "\n"


def compare(before: Dict, after: Dict) -> str:
    """A before/after table of the headline figures per tier."""
    rows = []
    for tier in (1, 2, 3):
        for tag, res in (("before", before), ("after", after)):
            kv = [_t(r["tiers"], tier) for r in (res.get("kv") or {}).values()]
            ppl = ", ".join(_pct(k.get("ppl_change_pct"), 2, sign=True) for k in kv if k) or "-"
            rm = " ; ".join(f"{k['k_rrmse'] * 100:.2f}% / {k['v_rrmse'] * 100:.2f}%" for k in kv if k) or "-"
            rec = []
            for s in ("sentences", "tokens"):
                e = _t(((res.get("emb") or {}).get(s) or {}).get("tiers"), tier)
                rec.append(f"{e['recall']:.3f} / {e['recall_rescored']:.3f}" if e else "-")
            w = _t((res.get("weights") or {}).get("tiers"), tier)
            rows.append([f"{tier} {tag}", _bits(res, tier), ppl, rm, "; ".join(rec),
                         _pct(w["rrmse"]) if w else "-"])
    e2e_rows = []
    for tag, res in (("before", before), ("after", after)):
        e = res.get("e2e") or {}
        if e and not e.get("pending"):
            e2e_rows.append(f"- end to end {tag}: {e['tokens']} tokens, perplexity {_pct(e['ppl_change_pct'], 2, sign=True)}, "
                            f"{e['disk_bytes'] / e['f16_bytes'] * 100:.1f}% of the f16 cache on disk")
        elif e:
            e2e_rows.append(f"- end to end {tag}: pending ({e['pending']})")
    return (f"Before: {before['label']}; after: {after['label']}.\n\n"
            + _table(["tier", "bits/value (KV / W / E)", "KV ppl change", "K / V rel. RMSE",
                      "recall@10 raw / 4x: sentences; tokens", "weights rel. RMSE"], rows)
            + ("\n\n" + "\n".join(e2e_rows) if e2e_rows else ""))


if __name__ == "__main__":
    import json
    import sys

    docs = [json.load(open(p)) for p in sys.argv[1:]]
    if len(docs) == 1:
        print(render(docs[0]))
    elif len(docs) == 2:
        print(compare(*docs))
    else:
        sys.exit("usage: report.py RESULTS.json [AFTER.json]")
