#!/usr/bin/env bash
# Median on-CPU time (perf task-clock) per decode, before vs after; see README.md.
#   bash bench/quant/cpu_time/run.sh BEFORE_CRATE AFTER_CRATE WHAT ITERS REPS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
before=$(cd "$1" && pwd); after=$(cd "$2" && pwd); what=$3; iters=$4; reps=$5
for v in before after; do
  dir="$repo/target/quant_cpu_time/$v"
  if [ ! -x "$dir/target/release/quant_cpu" ]; then
    crate=$([ $v = before ] && echo "$before" || echo "$after")
    mkdir -p "$dir/src"
    cp "$here/src/main.rs" "$dir/src/main.rs"
    printf '[package]\nname = "quant_cpu"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\ntensorvault-quant = { path = "%s" }\n[profile.release]\ndebug = 1\n[workspace]\n' "$crate" > "$dir/Cargo.toml"
    (cd "$dir" && cargo build --release -q) >&2
  fi
done
tc() { perf stat -x, -e task-clock "$1" "$what" "$2" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
for v in before after; do
  bin="$repo/target/quant_cpu_time/$v/target/release/quant_cpu"; vals=""; zeros=""
  for _ in $(seq "$reps"); do vals="$vals $(tc "$bin" "$iters")"; zeros="$zeros $(tc "$bin" 0)"; done
  python3 - "$what" "$v" "$iters" "$vals" "$zeros" <<'PY'
import sys, statistics as st
w, v, it = sys.argv[1], sys.argv[2], int(sys.argv[3])
vals = [float(x) for x in sys.argv[4].split()]; zeros = [float(x) for x in sys.argv[5].split()]
per = (st.median(vals) - st.median(zeros)) / it * 1000
print(f"{w:6s} {v:6s} {per:8.2f} us per decode  (runs, ms: {' '.join(f'{x:.0f}' for x in vals)}; setup {st.median(zeros):.0f})")
PY
done
