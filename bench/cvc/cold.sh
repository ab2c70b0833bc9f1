#!/usr/bin/env bash
# Cold-cache CVC loads (issue 17): every run evicts the file from the page cache
# (posix_fadvise DONTNEED, checked with fincore) and loads it once, in a fresh process.
# Rounds alternate the contenders so they all meet the same disk and memory conditions:
#   read       plain sequential read of the file (8 MiB blocks), the baseline
#   read_fill  the same read plus filling a fresh buffer of the decoded size
#   lib mmap   CvcReader::open_mmap + load_all;  lib pread: CvcReader::open + load_all
#   cli        tensorvault cvc load FILE - > /dev/null (the .npy streamed to stdout)
#   python     tensorvault.load_cvc (when the bench venv has tensorvault installed)
#   decompressed  decompressed.load_cvc (the reference), same file
#
#   bench/cvc/cold.sh [ROUNDS] [ROWS]      (defaults 5, 1000000 x 768)
# Environment: WORKDIR (default /tmp/tensorvault-bench-cold; needs ~6 GB free).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}
rows=${2:-1000000}
work=${WORKDIR:-/tmp/tensorvault-bench-cold}
mkdir -p "$work"
py=$("$root/bench/setup_venv.sh")
cd "$root"
cargo build --release -q -p tensorvault-cli -p tensorvault-formats --example cvc_cold
tv="$root/target/release/tensorvault"
ex="$root/target/release/examples/cvc_cold"
if [ ! -f "$work/x_$rows.npy" ]; then
  "$py" - "$work/x_$rows.npy" "$rows" <<'PY'
import sys, numpy as np
path, rows = sys.argv[1], int(sys.argv[2])
a = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, 768))
rng = np.random.default_rng(5)
for i in range(0, rows, 50000):
    a[i:i + 50000] = rng.standard_normal((min(50000, rows - i), 768), dtype=np.float32)
a.flush()
PY
fi
for comp in fp16 int8; do
  [ -f "$work/$comp.cvc" ] || "$tv" -q cvc pack "$work/x_$rows.npy" "$work/$comp.cvc" --compression "$comp" --json > /dev/null
done
"$py" "$root/bench/cvc/evict.py" "$work/x_$rows.npy"
has_tv=$("$py" -c "import tensorvault" 2>/dev/null && echo 1 || echo 0)
results="$work/cold.jsonl"
: > "$results"
# Each contender times itself from before it opens the file to the loaded array (the
# interpreter's start-up is not a load's cost); the CLI is timed as a whole process.
run() {  # comp name command...
  local comp=$1 name=$2; shift 2
  "$py" "$root/bench/cvc/evict.py" "$work/$comp.cvc"
  local t0 t1 secs
  t0=$(date +%s.%N)
  secs=$("$@" | grep -o '"seconds":[0-9.]*' | cut -d: -f2 || true)
  t1=$(date +%s.%N)
  [ -n "$secs" ] || secs=$(echo "$t1 - $t0" | bc)
  secs=$(printf "%.6f" "$secs")
  echo "{\"comp\":\"$comp\",\"impl\":\"$name\",\"seconds\":$secs}" | tee -a "$results"
}
pytime='import json, sys, time
t = time.perf_counter()
LOAD(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t}))'
tv_py="import tensorvault as tv
${pytime/LOAD/tv.load_cvc}"
dc_py="import warnings; warnings.simplefilter('ignore'); import decompressed as d
def load(p): return d.load_cvc(p, device='cpu')
${pytime/LOAD/load}"
for r in $(seq "$rounds"); do
  for comp in fp16 int8; do
    f="$work/$comp.cvc"
    run "$comp" read "$ex" "$f" read
    run "$comp" read_fill "$ex" "$f" read_fill
    run "$comp" "lib mmap" "$ex" "$f" mmap
    run "$comp" "lib pread" "$ex" "$f" pread
    run "$comp" cli sh -c '"$0" -q cvc load "$1" - 2>&1 > /dev/null' "$tv" "$f"
    if [ "$has_tv" = 1 ]; then
      run "$comp" python "$py" -c "$tv_py" "$f"
    fi
    run "$comp" decompressed "$py" -c "$dc_py" "$f"
  done
done
"$py" - "$results" "$work" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"\n{'file':>6} {'contender':<14} {'median s':>9} {'GB/s of file':>13} {'vs read':>8} {'vs read_fill':>13}")
for comp in ("fp16", "int8"):
    size = os.path.getsize(f"{sys.argv[2]}/{comp}.cvc")
    med = {}
    for r in rows:
        if r["comp"] == comp:
            med.setdefault(r["impl"], []).append(r["seconds"])
    med = {k: statistics.median(v) for k, v in med.items()}
    for k, s in med.items():
        print(f"{comp:>6} {k:<14} {s:9.3f} {size / s / 1e9:13.2f} {med['read'] / s:7.0%} {med['read_fill'] / s:12.0%}")
PY
