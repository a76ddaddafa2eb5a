#!/usr/bin/env bash
# Install everything the tests need into .venv (and the Debian packages for the real servers the
# integration tests start: etcd, PostgreSQL) and run the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -k segment`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
ensure_debian_packages etcd-server postgresql
ensure_java
ensure_venv test
echo "running tests with $(.venv/bin/python --version)"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${@:-tests}"
