"""Side-by-side peers for the quantization codec (run by run.sh).

usage: peers.py DATA.npy OURS.jsonl REPS

* numpy: a straightforward vectorized implementation of tensorvault's groupwise symmetric
  scheme (f16 scale per group, round half away from zero, LSB-first bit packing).
* gguf: the `gguf` package's numpy quantizers Q8_0 and Q4_0 (ggml's reference semantics).

Prints a markdown table: median seconds -> f32 GB/s per implementation, ratios vs
tensorvault at the same setting, RMSE at equal bits per value.
"""
import json
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T


def median_time(reps, f):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def np_quant(x, bits, g):
    qmax = (1 << (bits - 1)) - 1
    xg = x.reshape(-1, g)
    amax = np.abs(xg).max(axis=1, keepdims=True)
    scale = (amax / qmax).astype(np.float16).astype(np.float32)
    inv = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale != 0)
    y = xg * inv
    q = np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), -qmax, qmax).astype(np.int32) + (qmax + 1)
    if bits == 8:
        packed = q.astype(np.uint8)
    else:
        # bit k of code i -> stream bit i*bits + k, LSB first.
        bitsarr = ((q.reshape(-1, 1) >> np.arange(bits)) & 1).astype(np.uint8)
        packed = np.packbits(bitsarr.reshape(-1), bitorder="little")
    return scale.astype(np.float16), packed


def np_dequant(scale, packed, bits, g, n):
    if bits == 8:
        q = packed.astype(np.int32)
    else:
        b = np.unpackbits(packed, bitorder="little")[: n * bits].reshape(-1, bits)
        q = (b.astype(np.int32) << np.arange(bits)).sum(axis=1)
    q = q - (1 << (bits - 1))
    return (q.reshape(-1, g).astype(np.float32) * scale.astype(np.float32)).reshape(-1)


def rel(a, b):
    """a / b for an error ratio; 'both exact' when both are 0."""
    if b == 0:
        return "both exact" if a == 0 else "inf"
    return f"{a / b:.3f}"


def rmse(a, b):
    return float(np.sqrt(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)))


def main():
    data, ours_path, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    x = np.load(data).astype(np.float32).reshape(-1)
    gb = x.nbytes / 1e9
    # quant_bench prints Rust's `inf` for the SNR of an exact encoding (SmolLM's table was
    # Q4_1 in its GGUF: 8-bit groups of 32 reproduce it exactly); Python's json reads
    # `Infinity`.
    ours = [json.loads(l.replace(":inf", ":Infinity")) for l in open(ours_path) if l.startswith("{")]
    key = {(o["bits"], o["group_size"], o["levels"]): o for o in ours}
    rows = []
    for bits, g in [(8, 32), (4, 32), (8, 128), (7, 128), (5, 256), (3, 512)]:
        o = key[(bits, g, "Symmetric")]
        out = {}
        tq = median_time(reps, lambda: out.__setitem__("r", np_quant(x, bits, g)))
        s, p = out["r"]
        td = median_time(reps, lambda: out.__setitem__("y", np_dequant(s, p, bits, g, x.size)))
        rows.append(dict(setting=f"{bits}-bit g{g} symmetric", bpv=bits + 16 / g,
                         tv=o, np_q=gb / tq, np_d=gb / td, np_rmse=rmse(x, out["y"])))
    for t, bits in [(T.Q8_0, 8), (T.Q4_0, 4)]:
        out = {}
        xm = x.reshape(-1, 4096)
        tq = median_time(reps, lambda: out.__setitem__("q", gguf.quants.quantize(xm, t)))
        td = median_time(reps, lambda: out.__setitem__("y", gguf.quants.dequantize(out["q"], t)))
        y = out["y"].reshape(-1)
        o_sym = key[(bits, 32, "Symmetric")]
        o_full = key[(bits, 32, "Full")]
        rows.append(dict(setting=f"gguf {t.name}", bpv=bits + 0.5, gguf_q=gb / tq, gguf_d=gb / td,
                         gguf_rmse=rmse(x, y), tv=o_sym, tv_full=o_full))

    print(f"array: {x.size} f32 values ({x.nbytes / 1e6:.1f} MB), single thread, median of {reps} runs\n")
    print("| setting | bits/value | tensorvault quant GB/s | dequant GB/s | peer | peer quant GB/s | peer dequant GB/s | speedup quant | speedup dequant | RMSE tensorvault | RMSE peer | RMSE ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        o = r["tv"]
        if "np_q" in r:
            peer, pq, pd, pr = "numpy (same scheme)", r["np_q"], r["np_d"], r["np_rmse"]
        else:
            peer, pq, pd, pr = r["setting"], r["gguf_q"], r["gguf_d"], r["gguf_rmse"]
        name = r["setting"] if "np_q" in r else f"{o['bits']}-bit g32 symmetric"
        print(f"| {name} | {r['bpv']:.3f} | {o['quant_gbps']:.2f} | {o['dequant_gbps']:.2f} | {peer} | {pq:.3f} | {pd:.3f} | "
              f"{o['quant_gbps'] / pq:.0f}x | {o['dequant_gbps'] / pd:.0f}x | {o['rmse']:.5g} | {pr:.5g} | {rel(o['rmse'], pr)} |")
        if "tv_full" in r:
            f = r["tv_full"]
            print(f"| {f['bits']}-bit g32 full levels | {r['bpv']:.3f} | {f['quant_gbps']:.2f} | {f['dequant_gbps']:.2f} | {peer} | {pq:.3f} | {pd:.3f} | "
                  f"{f['quant_gbps'] / pq:.0f}x | {f['dequant_gbps'] / pd:.0f}x | {f['rmse']:.5g} | {pr:.5g} | {rel(f['rmse'], pr)} |")
    print("\nsymmetric vs full levels (same bits/value, same array):\n")
    print("| bits | group | bits/value | ratio (segment) | RMSE symmetric | RMSE full | full / symmetric | max err symmetric | max err full |")
    print("|---|---|---|---|---|---|---|---|---|")
    for o in ours:
        if o["levels"] != "Symmetric":
            continue
        f = key.get((o["bits"], o["group_size"], "Full"))
        if f:
            print(f"| {o['bits']} | {o['group_size']} | {o['bits_per_value']:.3f} | {o['ratio']:.2f}x | {o['rmse']:.5g} | {f['rmse']:.5g} | "
                  f"{rel(f['rmse'], o['rmse'])} | {o['max_abs_error']:.4g} | {f['max_abs_error']:.4g} |")


if __name__ == "__main__":
    main()
