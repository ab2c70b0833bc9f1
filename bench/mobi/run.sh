#!/usr/bin/env bash
# MOBI side by side with onnxruntime on real models (issue 22 item 7); results go to
# bench/RESULTS.md, section "MOBI vs onnxruntime".
#   bench/mobi/run.sh [--reps N] [--loads N] [--models lenet5,cifar,mlp,efficientnet_lite0] [--latency-only]
# (--latency-only: only the latency table, no sizes, loads or header parse).
# Uses the venv of tests/mobi_models (onnxruntime, onnx, the EfficientNet-Lite0 weights),
# the release CLI and the tensorvault wheel ($TV_WHEEL, else scripts/build_wheel.sh).
# Header parse: the criterion bench `mobi/header_parse` (Header::parse of a file's bytes).
# TV_BEFORE_EXT=path/to/_tensorvault.abi3.so (another build's extension module, e.g.
# unpacked from main's wheel) adds "before" columns to the latency table, same rounds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export CARGO_TERM_COLOR=never
py=$(tests/mobi_models/setup_venv.sh)
cargo build -q --release -p tensorvault-cli
export TV_BIN="$root/${CARGO_TARGET_DIR:-target}/release/tensorvault"
wheel=${TV_WHEEL:-}
[ -n "$wheel" ] || wheel=$(scripts/build_wheel.sh)
"$py" -m pip uninstall -q -y tensorvault 2>/dev/null || true
"$py" -m pip install -q --no-index --no-deps --only-binary :all: "$wheel"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "onnxruntime $("$py" -c 'import onnxruntime; print(onnxruntime.__version__)'), tensorvault wheel $(basename "$wheel")"
echo
case " $* " in
  *" --latency-only "*) ;;
  *)
    echo "Header parse (criterion, median):"
    cargo bench -q -p tensorvault-formats --bench mobi -- header_parse --warm-up-time 1 --measurement-time 3 2>/dev/null \
      | grep -A1 "header_parse" | grep -Eo "time: +\[[^]]*\]" || echo "(criterion header_parse bench not found)"
    ;;
esac
(cd "$root/bench/mobi" && "$py" bench.py "$@")
