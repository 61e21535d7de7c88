#!/usr/bin/env bash
# bubblewrap for the sandbox tests (tests/test_sandbox.py): Debian's package, nothing upgraded.
# Where it cannot be installed, or the machine refuses the namespaces it needs, those tests are
# skipped and say why.
set -euo pipefail
if ! command -v bwrap >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get install -y --no-upgrade bubblewrap >/dev/null || echo "sandbox_setup.sh: could not install bubblewrap"
    else
        echo "sandbox_setup.sh: no apt-get here; install bubblewrap to run the sandbox tests"
    fi
fi
