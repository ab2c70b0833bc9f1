#!/usr/bin/env bash
# Run every test of the project: format check, clippy (warnings are errors), the whole
# workspace's tests (unit, integration, property, doc), and a CLI smoke run.
# Needs only a Rust toolchain; fetches crates from crates.io on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings denied)"
cargo clippy --workspace --all-targets -q -- -D warnings

echo "== cargo test (workspace)"
cargo test --workspace -q 2>&1 | tee /tmp/tensorvault-test.log | grep -E "^(test result|running|error|failures|---- )|panicked" || true
if grep -qE "^test result: FAILED|^error(\[|:)" /tmp/tensorvault-test.log; then
  echo "tests failed (full log: /tmp/tensorvault-test.log)" >&2
  exit 1
fi
passed=$(grep -E "^test result: ok" /tmp/tensorvault-test.log | sed -E 's/.* ([0-9]+) passed.*/\1/' | paste -sd+ | bc)
echo "== demo smoke run (small workload)"
cargo run -q --release -p tensorvault-cli -- -q demo "$(mktemp -d)/demo" --rows 2000 --dim 64 --chunk-size 500 > /tmp/tensorvault-demo.log
grep -q "int8" /tmp/tensorvault-demo.log && cat /tmp/tensorvault-demo.log
echo "$passed passed, 0 failed"
