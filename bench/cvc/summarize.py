"""Print the CVC side-by-side table from the JSON lines of peer.py and cvc_bench."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
g = {(r["impl"], r["op"]): r.get("gb_per_s") for r in rows if "gb_per_s" in r}
memcpy = g.get(("numpy", "memcpy_fresh"))
print()
print(f"{'operation':<14} {'tensorvault GB/s':>17} {'decompressed GB/s':>18} {'ratio':>7}   {'vs numpy memcpy':>15}")
print("-" * 78)
for op, tv_op in [("pack fp16", "pack_fp16_file"), ("pack int8", "pack_int8_file"),
                  ("load fp16", "load_fp16_mmap"), ("load int8", "load_int8_mmap")]:
    ref_op = tv_op
    tv, ref = g.get(("tensorvault", tv_op)), g.get(("decompressed", ref_op))
    vs = f"{tv / memcpy:.0%}" if op.startswith("load") and memcpy else "-"
    print(f"{op:<14} {tv:>17.2f} {ref:>18.2f} {tv / ref:>6.1f}x   {vs:>15}")
print(f"\nnumpy memcpy of the decoded array (fresh buffer): {memcpy:.2f} GB/s;"
      f" tensorvault's own fresh-buffer copy: {g.get(('tensorvault', 'memcpy_fresh')):.2f} GB/s")
print("tensorvault pack = atomic write with fsync; without fsync: "
      f"fp16 {g.get(('tensorvault', 'pack_fp16_file_nosync')):.2f}, int8 {g.get(('tensorvault', 'pack_int8_file_nosync')):.2f} GB/s"
      " (decompressed does not fsync)")
print("load via pread instead of mmap: "
      f"fp16 {g.get(('tensorvault', 'load_fp16_pread')):.2f}, int8 {g.get(('tensorvault', 'load_int8_pread')):.2f} GB/s")
