#!/usr/bin/env bash
# Create (once) the Python environment the side-by-side benchmarks use: the peers
# (decompressed 2.1.1, gguf) and numpy. Prints the venv's python path.
# decompressed ships only an sdist that builds with CMake; without a CUDA toolkit its
# native module does not import, so its CPU path is numpy (as its own README observes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
exec 9>"$here/.venv.lock"
flock 9   # one installer at a time (benchmarks may start together)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import decompressed, gguf, numpy" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "decompressed==2.1.1" "gguf" "numpy" >&2
fi
echo "$venv/bin/python"
