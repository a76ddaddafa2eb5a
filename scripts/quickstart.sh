#!/usr/bin/env bash
# Install strata into .venv, start a local cluster (coordinator, broker, two historicals on
# embedded defaults), ingest Wikipedia-like demo data with a SQL INSERT (a Spark job), run example
# queries, print how to connect.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
ensure_java
ensure_venv
ensure_console_deps
ROWS="${STRATA_DEMO_ROWS:-500000}"
CLUSTER="${STRATA_CLUSTER_DIR:-var/cluster}"
DATA="${STRATA_DEMO_DIR:-var/demo}"

if [ -f "$CLUSTER/cluster.json" ] && .venv/bin/strata status --dir "$CLUSTER" >/dev/null 2>&1; then
  echo "reusing the cluster running from $CLUSTER"
else
  [ -f "$CLUSTER/cluster.json" ] && .venv/bin/strata down --dir "$CLUSTER" >/dev/null 2>&1 || true
  .venv/bin/strata up --dir "$CLUSTER" --historicals 2
fi
.venv/bin/strata demo --dir "$DATA" --rows "$ROWS" --cluster "$CLUSTER"
.venv/bin/strata status --dir "$CLUSTER"
cat <<MSG

strata is running from $CLUSTER (logs in $CLUSTER/logs). Connect with:
  SQL:         .venv/bin/strata sql --dir $CLUSTER "SELECT channel, COUNT(*) AS edits FROM wikipedia GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
  Flight SQL:  grpc://127.0.0.1:8815  (ADBC: adbc_driver_flightsql.dbapi.connect("grpc://127.0.0.1:8815"); see README.md)
  native JSON: .venv/bin/strata query --dir $CLUSTER '{"queryType":"timeseries","dataSource":"wikipedia",
               "intervals":["2015-09-12/2015-09-19"],"granularity":"hour","aggregations":[{"type":"count","name":"edits"}]}'
  ingest:      .venv/bin/strata sql --dir $CLUSTER --file my_insert.sql   (INSERT/REPLACE ... PARTITIONED BY, runs on Spark)
  console:     http://127.0.0.1:8888/   (the router: web console and Druid's HTTP API paths)
  Druid HTTP:  curl -s -XPOST -H 'Content-Type: application/json' http://127.0.0.1:8092/druid/v2/sql \
                 -d '{"query":"SELECT COUNT(*) FROM wikipedia","resultFormat":"array"}'
  metrics:     curl http://127.0.0.1:8092/metrics   (broker; coordinator 8081, historicals 8093, 8094)
Stop it with: .venv/bin/strata down --dir $CLUSTER
MSG
