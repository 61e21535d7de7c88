#!/usr/bin/env bash
# What the browser test (tests/browser/test_lab_browser.py) needs on a fresh Debian
# machine, as root.  Safe to run again.  Never runs `playwright install`: Playwright
# drives Debian's chromium through its executable path.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-upgrade chromium
fi

# node and npm build the labextension during `pip install`; this machine kind has them.
if ! command -v node >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-upgrade nodejs npm
fi

python -m pip install -q "playwright>=1.45"
