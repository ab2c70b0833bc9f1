#!/usr/bin/env bash
# KV-cache simulation (issue 6 item 4): a decoder's attention KV cache in the temporal
# tensor store, 32 layers x 8 heads x (k, v), head_dim 128, f16, a 512-token prompt and
# 3584 decode steps (4096 tokens) with a sliding window, attention sinks and occasional
# older reads; a manual clock ticks once per step and maintain(budget) runs every 16
# steps. Prints blocks per tier, bytes on disk against the same cache in f16, read
# latency and the reconstruction error per tier; writes the history JSON and an HTML
# report (tensorvault store report) into OUT. About a minute on 2 cores.
#
#   bench/store/kv_sim.sh [OUT] [kv_sim flags...]     (OUT defaults to $TMPDIR/tv-kv-sim;
#                                                     e.g. --quick, --steps 7680; see
#                                                     crates/tensorvault-store/examples/kv_sim.rs)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${TMPDIR:-/tmp}/tv-kv-sim}
shift || true
mkdir -p "$out"
cd "$root"
cargo build --release -q -p tensorvault-store --example kv_sim
cargo build --release -q -p tensorvault-cli
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -r)," \
  "fs $(df -T "$out" | awk 'NR == 2 {print $2}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(rustc --version)"
"$root/target/release/examples/kv_sim" --dir "$out/store" --keep --history "$out/kv_sim.json" "$@"
"$root/target/release/tensorvault" store report "$out/store" sim kv --history "$out/kv_sim.json" \
  --out "$out/kv_report.html"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
