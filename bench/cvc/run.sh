#!/usr/bin/env bash
# Side-by-side CVC benchmark: tensorvault vs the reference `decompressed` 2.1.1 (CPU) and
# plain numpy, in one run, on a synthetic 200,000 x 768 float32 array (standard normal) and
# on two real ones: all-MiniLM-L6-v2 sentence embeddings of real text (21,000 x 384) and
# SmolLM2-135M's token-embedding table (49,152 x 576). Then the streaming check:
# `tensorvault cvc pack` / `cvc load` of a ~2 GB file with their peak RSS.
#
#   bench/cvc/run.sh [REPEATS] [STREAM_ROWS]
#
# Environment: WORKDIR (default /tmp/tensorvault-bench-cvc; needs ~9 GB free).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
repeats=${1:-5}
stream_rows=${2:-1400000}
work=${WORKDIR:-/tmp/tensorvault-bench-cvc}
mkdir -p "$work"
py=$("$root/bench/setup_venv.sh")
cd "$root"
cargo build --release -q -p tensorvault-cli -p tensorvault-formats --example cvc_bench
tv="$root/target/release/tensorvault"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
echo "== generating 200000 x 768 float32 (standard normal, seed 1234)"
"$py" -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(1234).standard_normal((200000, 768), dtype=np.float32))"

# Real inputs (bench/cvc/real_data.py, cached in bench/cvc/.data): MiniLM sentence
# embeddings of real text and SmolLM2's token-embedding table.
mapfile -t real < <("$py" "$root/bench/cvc/real_data.py" "$root/bench/cvc/.data")
results="$work/results.jsonl"
: > "$results"
for input in "$work/x.npy" "${real[@]}"; do
  name=$(basename "$input" .npy)
  [ "$name" = x ] && name=synthetic
  tag="s/^{/{\"data\": \"$name\", /"
  echo "== $name: reference (decompressed, numpy) x$repeats"
  "$py" "$root/bench/cvc/peer.py" "$input" "$work" "$repeats" | sed "$tag" | tee -a "$results"
  echo "== $name: tensorvault x$repeats"
  "$root/target/release/examples/cvc_bench" "$input" "$work" "$repeats" | sed "$tag" | tee -a "$results"
done
"$py" "$root/bench/cvc/summarize.py" "$results"

echo "== streaming: $stream_rows x 768 (pack from a memory-mapped .npy, load to .npy)"
"$py" - "$work/big.npy" "$stream_rows" <<'PY'
import sys, numpy as np
path, rows = sys.argv[1], int(sys.argv[2])
a = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, 768))
rng = np.random.default_rng(5)
for i in range(0, rows, 50000):
    a[i:i + 50000] = rng.standard_normal((min(50000, rows - i), 768), dtype=np.float32)
a.flush()
PY
for comp in fp16 int8; do
  /usr/bin/time -f "%M %e" -o "$work/time_pack" "$tv" -q cvc pack "$work/big.npy" "$work/big_$comp.cvc" --compression "$comp" --chunk-size 10000 --json > "$work/pack.json"
  /usr/bin/time -f "%M %e" -o "$work/time_load" "$tv" -q cvc load "$work/big_$comp.cvc" "$work/big_out.npy" --json > "$work/load.json"
  "$py" - "$work" "$comp" <<'PY'
import json, sys
work, comp = sys.argv[1], sys.argv[2]
chunk_decoded = 10000 * 768 * 4
for op in ("pack", "load"):
    rss_kb, secs = open(f"{work}/time_{op}").read().split()
    info = json.load(open(f"{work}/{op}.json"))
    size = info.get("bytes") or info.get("bytes_out")
    print(f"{comp} {op}: file {int(size)/1e9:.2f} GB in {float(secs):.2f} s, peak RSS {int(rss_kb)/1024:.1f} MiB"
          f" = {int(rss_kb)*1024/chunk_decoded:.2f} decoded chunks of 10000 x 768 f32 (29.3 MiB)")
PY
  rm -f "$work/big_out.npy"
done
rm -f "$work/big.npy" "$work"/big_*.cvc
