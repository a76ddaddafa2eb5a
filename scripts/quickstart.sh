#!/usr/bin/env bash
# Install strata into .venv, generate demo data, build segments and run example queries.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
ensure_venv
ROWS="${STRATA_DEMO_ROWS:-500000}"
DIR="${STRATA_DEMO_DIR:-var/demo}"
.venv/bin/strata demo --dir "$DIR" --rows "$ROWS"
cat <<MSG

strata is installed in .venv and the demo segments are in $DIR/segments.
Try:
  .venv/bin/strata inspect $DIR/segments --verify
  .venv/bin/strata query --segments $DIR/segments '{"queryType":"timeseries","dataSource":"wikipedia",
      "intervals":["2015-09-12/2015-09-19"],"granularity":"hour","aggregations":[{"type":"count","name":"edits"}]}'
  .venv/bin/python bench/engine.py --rows 1000000
MSG
