#!/usr/bin/env bash
# Many processes on one prefix cache (issue 24 item 6): 1 writer + N reader processes for a
# fixed time, every loaded value checked against what was stored:
#   bash bench/kv_prefix/processes.sh [--secs 60] [--readers 4] [--budget-mb 768]
# Release build of the store crate's example (crates/tensorvault-store/examples/prefix_processes.rs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
exec cargo run -q --release -p tensorvault-store --example prefix_processes -- "$@"
