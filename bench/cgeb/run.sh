#!/usr/bin/env bash
# CGEB format comparison (issue 4): one criterion run of crates/tensorvault-bench/benches/cgeb.rs
# (serde_json, bincode, rkyv, CGEB owned / zero-copy, batch get + scan), then a table of medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
log=$(mktemp)
cargo bench -p tensorvault-bench --bench cgeb -- --noplot 2>&1 | tee "$log" >/dev/null
python3 bench/cgeb/summarize.py "$log" target/criterion
