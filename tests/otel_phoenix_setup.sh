#!/usr/bin/env bash
# Arize Phoenix, the OTLP-ingesting server of tests/test_otel_phoenix.py, in a virtualenv of its
# own under the user's cache folder, so that its pins never meet the project's dependencies.
# Prints the path of its `phoenix` program.  Usage: bash tests/otel_phoenix_setup.sh
set -euo pipefail
PHOENIX_VERSION="${MEMFIT_PHOENIX_VERSION:-20.26.1}"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/memfit-jupyter/phoenix-$PHOENIX_VERSION"
if [ ! -x "$VENV/bin/phoenix" ]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet "arize-phoenix==$PHOENIX_VERSION" >&2
fi
echo "$VENV/bin/phoenix"
