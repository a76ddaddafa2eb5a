#!/usr/bin/env bash
# Install everything the tests need into .venv and run the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -k segment`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
ensure_venv test
echo "running tests with $(.venv/bin/python --version)"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${@:-tests}"
