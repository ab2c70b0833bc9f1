#!/usr/bin/env bash
# Python side-by-side benchmark: tensorvault (built --release with maturin) vs
# decompressed 2.1.1 (CVC pack/load) and safetensors.numpy (checkpoint load), 200,000 x 768.
# Plus CVC rows on real inputs (bench/cvc/real_data.py: MiniLM sentence embeddings of real
# text, SmolLM2's token-embedding table), made with the benchmark venv (bench/setup_venv.sh).
# Usage: bench/python/run.sh [reps] [rows] [dim]
set -euo pipefail
cd "$(dirname "$0")/../.."
pyvenv=target/py-venv
if [ ! -x "$pyvenv/bin/maturin" ] || ! "$pyvenv/bin/python" -c "import numpy, safetensors, decompressed" 2>/dev/null; then
  python3 -m venv "$pyvenv"
  "$pyvenv/bin/pip" install -q --upgrade pip
  "$pyvenv/bin/pip" install -q maturin pytest numpy safetensors "decompressed==2.1.1"
fi
PATH="$PWD/$pyvenv/bin:$PATH" "$pyvenv/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall ./crates/tensorvault-py
"$pyvenv/bin/python" -c "import decompressed, safetensors, numpy; from importlib.metadata import version as v; print('decompressed', v('decompressed'), 'safetensors', v('safetensors'), 'numpy', numpy.__version__)" 2>/dev/null
mapfile -t real < <("$(bench/setup_venv.sh)" bench/cvc/real_data.py bench/cvc/.data)
exec "$pyvenv/bin/python" bench/python/bench.py "${1:-5}" "${2:-200000}" "${3:-768}" "${real[@]}"
