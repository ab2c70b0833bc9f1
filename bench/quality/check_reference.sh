#!/usr/bin/env bash
# Build llama.cpp's llama-perplexity and llama-tokenize from the llama-cpp-python sdist
# (the source build_ggml.sh fetched; about 10 minutes on 2 cores, once) and compare the
# numpy SmolLM2 forward pass with them (check_reference.py). Not part of run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
py=$(bash "$here/setup.sh")
bash "$here/build_ggml.sh" "$py"
src=$(ls -d "$target"/quality-cache/ggml/src/llama_cpp_python-*/vendor/llama.cpp | head -1)
build="$target/quality-cache/llama-build"
bin=$(dirname "$py")
if [ ! -x "$build/bin/llama-perplexity" ]; then
  "$bin/cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=ON > "$build.cmake.log"
  "$bin/cmake" --build "$build" -j 2 --target llama-perplexity llama-tokenize > "$build.log"
fi
exec "$py" "$here/check_reference.py" "$build/bin"
