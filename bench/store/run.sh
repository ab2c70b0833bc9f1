#!/usr/bin/env bash
# Temporal tensor store side by side with redb (issue 5), in one run: builds the
# `store_bench` example in release and runs it. Each round measures ours and redb back to
# back on fresh files (16 KiB blocks of f32): put (fsync off and fsync per write), warm
# get, index lookup, CRC32C, Tier1 -> Tier3 migration, reader throughput with 1 and 2
# threads; then, once, the open (MetaLog replay) of a collection whose log holds 1M
# records, index heap bytes per block and bytes on disk per tier. Prints markdown tables
# of medians over rounds and same-run ratios ours / redb. Default runtime ~1 minute.
#
#   bench/store/run.sh [ROUNDS] [DIR]      (defaults 5 and $TMPDIR or /tmp; DIR needs
#                                           ~0.5 GB free, plus a 4 GB sparse file)
#
# The criterion benches of the same core latencies:
#   cargo bench -p tensorvault-bench --bench store
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}
dir=${2:-${TMPDIR:-/tmp}}
cd "$root"
cargo build --release -q -p tensorvault-bench --example store_bench
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -r)," \
  "fs $(df -T "$dir" | awk 'NR == 2 {print $2}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(rustc --version); redb $(cargo tree -q -p tensorvault-bench -e dev -i redb --depth 0 2>/dev/null | awk '{print $2}')"
"$root/target/release/examples/store_bench" "$rounds" "$dir"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
