#!/usr/bin/env bash
# On-CPU time (perf task-clock) of the KV get / put / codes with 4 rANS lanes against
# 16 / 32 / 64 (session 15's vector decoder), one build, the runs of each layout
# interleaved in the same minute; prints medians and ratios to 4 lanes. See README.md.
#   bash bench/quant/cpu_time/wide.sh CRATE WHAT ITERS REPS LAYOUT...
# WHAT: kvdecw (get), kvencw (put), ransw (the codes alone).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
crate=$(cd "$1" && pwd); what=$2; iters=$3; reps=$4; shift 4
dir="$repo/target/quant_cpu_time/wide"
mkdir -p "$dir/src"
cp "$here/src/main.rs" "$dir/src/main.rs"
printf '[package]\nname = "quant_cpu"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\ntensorvault-quant = { path = "%s" }\n[profile.release]\ndebug = 1\n[workspace]\n' "$crate" > "$dir/Cargo.toml"
(cd "$dir" && cargo build --release -q) >&2
bin="$dir/target/release/quant_cpu"
tc() { perf stat -x, -e task-clock "$bin" "$1" "$2" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
for layout in "$@"; do
  declare -A vals=(); zeros=""
  for _ in $(seq "$reps"); do
    for l in 2 4 5 6; do vals[$l]="${vals[$l]:-} $(tc "${what}${l}_${layout}" "$iters")"; done
    zeros="$zeros $(tc "${what}2_${layout}" 0)"
  done
  python3 - "$what" "$layout" "$iters" "$zeros" "${vals[2]}" "${vals[4]}" "${vals[5]}" "${vals[6]}" <<'PY'
import sys, statistics as st
what, layout, it = sys.argv[1], sys.argv[2], int(sys.argv[3])
zero = st.median(float(x) for x in sys.argv[4].split())
per = [(st.median(float(x) for x in v.split()) - zero) / it * 1000 for v in sys.argv[5:9]]
cells = " | ".join(f"{p:7.2f} us ({per[0] / p:4.2f}x)" for p in per)
print(f"{what:6s} {layout:4s} | 4 / 16 / 32 / 64 lanes: {cells} | GiB/s at 64 KiB: " + " / ".join(f"{65536 / (p * 1e-6) / 2**30:.2f}" for p in per))
PY
  unset vals
done
