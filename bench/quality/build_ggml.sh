#!/usr/bin/env bash
# Build ggml's own quantizers (libggml-base.so: Q2_K..Q6_K and the rest) from the
# llama.cpp vendored in the llama-cpp-python sdist on PyPI, for the weights reference
# rows of the quality harness. Output: $CACHE/ggml/lib/libggml-base.so (CACHE defaults to
# ${CARGO_TARGET_DIR:-target}/quality-cache). Takes a minute or two; reused when present.
# Usage: build_ggml.sh VENV_PYTHON
set -euo pipefail
py=$1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
cache="$target/quality-cache/ggml"
lib="$cache/lib/libggml-base.so"
[ -f "$lib" ] && exit 0
mkdir -p "$cache/src"
bin=$(dirname "$py")
[ -x "$bin/cmake" ] || "$bin/pip" install -q cmake
if ! ls "$cache"/src/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
  # Only llama-cpp-python from source; its build tools (scikit-build-core, cmake) as wheels.
  "$bin/pip" download -q --no-deps --no-binary llama-cpp-python llama-cpp-python -d "$cache/src"
fi
sdist=$(ls "$cache"/src/llama_cpp_python-*.tar.gz | head -1)
tar -xzf "$sdist" -C "$cache/src"
ggml=$(ls -d "$cache"/src/llama_cpp_python-*/vendor/llama.cpp/ggml | head -1)
# The sdist leaves out ggml's pkg-config template, which a top-level ggml build configures.
[ -f "$ggml/ggml.pc.in" ] || : > "$ggml/ggml.pc.in"
"$bin/cmake" -S "$ggml" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_OPENMP=OFF -DGGML_NATIVE=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF > "$cache/cmake.log"
"$bin/cmake" --build "$cache/build" -j 2 --target ggml-base > "$cache/build.log"
mkdir -p "$cache/lib"
cp "$(find "$cache/build" -name 'libggml-base.so*' -type f | head -1)" "$lib"
