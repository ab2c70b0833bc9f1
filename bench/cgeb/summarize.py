"""Print the CGEB format comparison table from a criterion run (medians)."""
import json, re, sys, pathlib

log, root = sys.argv[1], pathlib.Path(sys.argv[2])
sizes = dict(re.findall(r"(\w+)=(\d+)", next(l for l in open(log) if l.startswith("SIZE"))))

def med(group, name):
    p = root / group / name / "new" / "estimates.json"
    return json.load(open(p))["median"]["point_estimate"] if p.exists() else float("nan")

def t(ns):
    return f"{ns / 1000:.2f} us" if ns >= 1000 else f"{ns:.1f} ns"

rows = [
    ("serde_json", sizes["serde_json"], med("cgeb_format", "serde_json_encode"), med("cgeb_format", "serde_json_decode"), "no"),
    ("bincode 1.3", sizes["bincode"], med("cgeb_format", "bincode_encode"), med("cgeb_format", "bincode_decode"), "no"),
    ("rkyv 0.8 (owned)", sizes["rkyv"], med("cgeb_format", "rkyv_encode"), med("cgeb_format", "rkyv_decode_owned"), "-"),
    ("rkyv 0.8 (validated access)", sizes["rkyv"], float("nan"), med("cgeb_format", "rkyv_access_validated"), "yes"),
    ("CGEB owned, hash on", sizes["cgeb"], med("cgeb_format", "cgeb_encode"), med("cgeb_format", "cgeb_decode_owned_hash"), "-"),
    ("CGEB owned, hash off", sizes["cgeb"], med("cgeb_format", "cgeb_encode_to_buffer"), med("cgeb_format", "cgeb_decode_owned_nohash"), "-"),
    ("CGEB zero-copy, hash on", sizes["cgeb"], float("nan"), med("cgeb_format", "cgeb_zero_copy_hash"), "yes"),
    ("CGEB zero-copy, hash off", sizes["cgeb"], float("nan"), med("cgeb_format", "cgeb_zero_copy_nohash"), "yes"),
]
print("| format | bytes/embedding | encode | decode | zero-copy |")
print("|---|---|---|---|---|")
for name, size, enc, dec, zc in rows:
    print(f"| {name} | {size} | {t(enc) if enc == enc else '-'} | {t(dec)} | {zc} |")
print()
print("| batch (4000 x 1536, 4096-aligned, warm cache) | median | rate |")
print("|---|---|---|")
for v in ("nohash", "hash"):
    g = med("cgeb_batch", f"random_get_1000_{v}")
    s = med("cgeb_batch", f"scan_copy_f32_{v}")
    print(f"| random get(i) + read 1 value, record hash {v} | {t(g / 1000)} / get | {1000 / g * 1e3:.2f} M gets/s |")
    print(f"| sequential scan, copy vector to f32, record hash {v} | {s / 1e6:.2f} ms / 32.8 MB | {4000 * 8192 / s:.2f} GB/s |")
