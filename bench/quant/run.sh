#!/usr/bin/env bash
# Quantization codec side by side (issue 3): tensorvault's groupwise k-bit codec vs a
# vectorized numpy implementation of the same scheme and gguf's Q8_0 / Q4_0 quantizers,
# in one run, on a synthetic weight-like array and on two real ones (bench/cvc/real_data.py:
# all-MiniLM-L6-v2 sentence embeddings of real text, SmolLM2's token-embedding table).
# Prints a markdown table per array (GB/s of f32, ratios, RMSE).
#   bench/quant/run.sh [REPS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=${1:-9}
py=$("$root/bench/setup_venv.sh")
data="$here/.data"
mkdir -p "$data"
# A weight-like matrix, 2048 x 2048 (16 MiB of f32): normal rows with log-normal
# per-output-channel scales and 0.1% outliers at 20x, fixed seed.
"$py" - "$data" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(2024)
x = rng.standard_normal((2048, 2048), dtype=np.float32) * 0.02
x *= rng.lognormal(0.0, 0.5, size=(2048, 1)).astype(np.float32)
mask = rng.random(x.shape) < 0.001
x[mask] *= 20
np.save(f"{d}/x.npy", x)
x.tofile(f"{d}/x.f32")
PY
(cd "$root" && cargo build --release -q -p tensorvault-quant --example quant_bench)
mapfile -t real < <("$py" "$root/bench/cvc/real_data.py" "$root/bench/cvc/.data")
for input in "$data/x.npy" "${real[@]}"; do
  name=$(basename "$input" .npy)
  [ "$name" = x ] && name="synthetic weight-like 2048 x 2048"
  # Flattened and cut to a multiple of 4096 values (gguf's quantizers take rows of 4096).
  "$py" - "$input" "$data/in.npy" "$data/in.f32" <<'PY'
import sys, numpy as np
x = np.load(sys.argv[1]).astype(np.float32).reshape(-1)
x = x[: x.size // 4096 * 4096]
np.save(sys.argv[2], x)
x.tofile(sys.argv[3])
PY
  echo "### $name"
  echo
  "$root/target/release/examples/quant_bench" "$data/in.f32" "$reps" > "$data/ours.jsonl"
  "$py" "$here/peers.py" "$data/in.npy" "$data/ours.jsonl" "$reps"
  echo
done
