#!/usr/bin/env bash
# Install everything the tests need into .venv (and the Debian packages for the real servers the
# integration tests start: etcd, PostgreSQL, Prometheus, a Java runtime for Spark) and run the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -k segment`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
ensure_debian_packages etcd-server postgresql prometheus chromium  # prometheus: promtool and a real Prometheus for the dashboards; chromium: the console's browser tests (Playwright drives it; never `playwright install`)
ensure_java
ensure_venv test
ensure_console_deps
echo "running tests with $(.venv/bin/python --version)"
log="$(mktemp)"
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "${@:-tests}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# Native extensions may print leak notices at interpreter exit, after pytest's summary; repeat the
# summary so it is the last thing printed.
summary="$(grep -E '^=* ?[0-9]+ (passed|failed|error)' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')"
rm -f "$log"
[ -n "$summary" ] && printf '\n%s\n' "$summary"
exit "$status"
