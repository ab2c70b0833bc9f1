"""Print the CVC side-by-side tables (one per input) from the JSON lines of peer.py and
cvc_bench, as tagged by run.sh with the input's name."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
datasets = list(dict.fromkeys(r.get("data", "synthetic") for r in rows))
for data in datasets:
    g = {(r["impl"], r["op"]): r.get("gb_per_s") for r in rows
         if "gb_per_s" in r and r.get("data", "synthetic") == data}
    memcpy = g.get(("numpy", "memcpy_fresh"))
    print(f"\n### {data}\n")
    print("| operation | tensorvault GB/s | decompressed GB/s | ratio | vs numpy memcpy |")
    print("|---|---|---|---|---|")
    for op, tv_op in [("pack fp16", "pack_fp16_file"), ("pack int8", "pack_int8_file"),
                      ("load fp16", "load_fp16_mmap"), ("load int8", "load_int8_mmap")]:
        tv, ref = g.get(("tensorvault", tv_op)), g.get(("decompressed", tv_op))
        vs = f"{tv / memcpy:.0%}" if op.startswith("load") and memcpy else "-"
        print(f"| {op} | {tv:.2f} | {ref:.2f} | {tv / ref:.1f}x | {vs} |")
    print(f"\nnumpy memcpy of the decoded array (fresh buffer): {memcpy:.2f} GB/s;"
          f" tensorvault's own fresh-buffer copy: {g.get(('tensorvault', 'memcpy_fresh')):.2f} GB/s")
    print("tensorvault pack = atomic write with fsync; without fsync: "
          f"fp16 {g.get(('tensorvault', 'pack_fp16_file_nosync')):.2f}, int8 {g.get(('tensorvault', 'pack_int8_file_nosync')):.2f} GB/s"
          " (decompressed does not fsync)")
    print("load via pread instead of mmap: "
          f"fp16 {g.get(('tensorvault', 'load_fp16_pread')):.2f}, int8 {g.get(('tensorvault', 'load_int8_pread')):.2f} GB/s")
