#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite.  Usage: bash tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[test]'

# The browser tests need Debian's Chromium and the Playwright driver (no browser download).
if [ -f tests/browser/setup.sh ]; then
  bash tests/browser/setup.sh
fi

export LITELLM_LOCAL_MODEL_COST_MAP=True
python -m ruff check memfit_jupyter tests
python -m pytest "$@"
