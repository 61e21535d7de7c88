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

export LITELLM_LOCAL_MODEL_COST_MAP=True
python -m ruff check memfit_jupyter tests
python -m mypy  # the files and strictness are in pyproject.toml
python -m pytest "$@"
