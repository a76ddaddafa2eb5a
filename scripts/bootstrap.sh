#!/usr/bin/env bash
# Shared by quickstart.sh and test.sh: make .venv and install strata (plus extras) into it.
# Usage: source scripts/bootstrap.sh [extras]   e.g. "test"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ensure_python() {
  if ! command -v python3 >/dev/null 2>&1; then
    echo "installing python3 (Debian packages)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
  fi
  if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
    echo "installing python3-venv (Debian package)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
}

# Debian packages by name, installed only when missing (apt-get update once, only if needed).
ensure_debian_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# PySpark 4 needs Java 17+; install Debian's runtime only when no java is on the PATH.
ensure_java() {
  if ! command -v java >/dev/null 2>&1; then
    ensure_debian_packages openjdk-17-jre-headless
  fi
}

# A C compiler and the Python headers build strata's compiled parts (setup.py: the nested JSON
# field split). Only the compiler is installed when missing: a pyenv or python.org interpreter
# ships its own headers, Debian's python3 takes them from python3-dev.
ensure_compiler() {
  command -v gcc >/dev/null 2>&1 || ensure_debian_packages gcc libc6-dev
  if ! python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    ensure_debian_packages python3-dev
  fi
}

# The web console's JavaScript dependencies (uPlot, for its charts) from the npm registry, exactly
# as services/router/console/package-lock.json pins them; the console works without them (no charts).
ensure_console_deps() {
  local dir="services/router/console"
  command -v npm >/dev/null || ensure_debian_packages npm
  # npm writes node_modules/.package-lock.json on install: newer than the lock file = up to date.
  if [ ! "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --silent)
  fi
}

ensure_venv() {
  local extras="${1:-}"
  ensure_python
  ensure_compiler
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  local spec="."
  if [ -n "$extras" ]; then spec=".[$extras]"; fi
  # Editable install: the console script 'strata' runs the checked-out code.
  .venv/bin/python -m pip install -q -e "$spec"
}
