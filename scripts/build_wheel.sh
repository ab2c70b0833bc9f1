#!/usr/bin/env bash
# Build the binary wheel of the Python package (crates/tensorvault-py), which users install
# with plain pip, no Rust toolchain:
#   - abi3 (pyo3 feature abi3-py39): one wheel, tag cp39-abi3, for every CPython >= 3.9;
#   - manylinux2014 (glibc >= 2.17): maturin links with zig (PyPI package ziglang) against
#     glibc 2.17 symbols, C dependencies (zstd) included; `auditwheel show` checks the policy.
# Needs a Rust toolchain and python3 (>= 3.9); maturin, ziglang and auditwheel come from
# PyPI into a venv under target/ (reused when present).
# Prints the wheel's path on stdout (the only thing it prints there); the log goes to stderr.
#   usage: scripts/build_wheel.sh [OUT_DIR]     (default target/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0
target_dir=${CARGO_TARGET_DIR:-target}
out=${1:-$target_dir/wheels}
venv=$target_dir/wheel-venv
# Pinned so that a new release cannot change the tags of the wheel under CI's feet.
tools=("maturin==1.16.0" "ziglang==0.17.1" "auditwheel==6.8.2")

if [ ! -x "$venv/bin/maturin" ] || ! "$venv/bin/python" -c "import ziglang, auditwheel" 2>/dev/null \
  || [ "$("$venv/bin/maturin" --version)" != "maturin 1.16.0" ]; then
  echo "== build_wheel: venv $venv (${tools[*]})" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "${tools[@]}" >&2
fi

mkdir -p "$out"
rm -f "$out"/tensorvault-*.whl
echo "== build_wheel: maturin build --release --zig --compatibility manylinux2014" >&2
# maturin finds zig through `python -m ziglang` of the venv's python on PATH.
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/maturin" build --quiet --release --zig \
  --compatibility manylinux2014 --strip --manifest-path crates/tensorvault-py/Cargo.toml \
  --out "$out" >&2

wheels=("$out"/tensorvault-*.whl)
if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "build_wheel: expected one wheel in $out, found: ${wheels[*]}" >&2
  exit 1
fi
wheel=${wheels[0]}
case "$(basename "$wheel")" in
  *-cp39-abi3-manylinux*2_17_x86_64*.whl | *-cp39-abi3-manylinux*2_17_aarch64*.whl) ;;
  *)
    echo "build_wheel: unexpected tags (want cp39-abi3-manylinux_2_17): $wheel" >&2
    exit 1
    ;;
esac
# The policy auditwheel derives from the symbols the extension actually links against
# (glibc symbol versions, shared libraries): it must be the one the tag claims.
report=$("$venv/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ')
policy=$(grep -o 'consistent with the following platform tag: "[^"]*"' <<< "$report" | sed 's/.*: //; s/"//g')
case "$policy" in
  manylinux_2_17_*) echo "== build_wheel: auditwheel show: policy $policy" >&2 ;;
  *)
    echo "build_wheel: auditwheel show does not confirm manylinux_2_17: $report" >&2
    exit 1
    ;;
esac
echo "$wheel"
