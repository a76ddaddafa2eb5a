"""What the k8s and compose checks share once their strata containers run as local processes:
the real external parts (etcd, PostgreSQL, an S3 server) made to look like the deployment's, and
the checks that the pods found each other (servers of both tiers seen, rules applied, data loaded
by tier and answered over Flight SQL)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

import pyarrow as pa

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient
from services.deep_storage import deep_storage_from_url
from services.rpc.convert import segment_id_from_proto
from tests.harness.local_pod import create_postgres_role

TIERS = {"hot", "cold"}
WAIT_S = 90.0


def prepare_externals(hosts, etcd_url: str, postgres_url: str, s3, *, postgres_user: str, postgres_password: str,
                      postgres_db: str, bucket: str, etcd_name: str = "etcd", postgres_name: str = "postgres",
                      s3_name: str = "minio") -> None:
    """Map the deployment's etcd, PostgreSQL and MinIO names to the real local servers, and do
    what their containers' environment and init jobs do: the role and database, the bucket."""
    hosts.add(etcd_name, 2379, urlsplit(etcd_url).netloc)
    pg = urlsplit(postgres_url)
    hosts.add(postgres_name, 5432, pg.netloc.rpartition("@")[2])
    hosts.add(s3_name, 9000, urlsplit(s3.endpoint).netloc)
    create_postgres_role(postgres_url, postgres_user, postgres_password, postgres_db)
    s3.filesystem().create_dir(bucket)


def wait_for(predicate, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except Exception as exc:  # not there yet: keep the last reason for the failure message
            last = exc
        time.sleep(0.5)  # between polls, inside the deadline
    raise AssertionError(f"{what} not reached within {timeout_s}s (last: {last!r})")


def flight_sql(flight: str, user: str, password: str, query: str) -> pa.Table:
    import adbc_driver_flightsql.dbapi as adbc

    with adbc.connect(f"grpc://{flight}", db_kwargs={"username": user, "password": password},
                      autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(query)
        return cur.fetch_arrow_table()


def check_cluster(*, coordinator_grpc: str, flight: str, user: str, password: str, historicals: dict[str, str],
                  deep_storage_url: str, s3_endpoint: str, duck) -> None:
    """``historicals``: node id -> tier. The broker sees the coordinator's servers of both tiers;
    segments published now land by the _default rules (recent: hot and cold; old: cold only) and
    the broker answers SQL over them as DuckDB does over the same rows."""
    assert set(historicals.values()) == TIERS

    client = ClusterClient(coordinator_grpc, None, credentials=(user, password))
    try:
        def coordinator_sees():
            infos = [s.info for s in client.servers().servers]
            seen = {i.id: i.tier for i in infos if i.role == "historical"}
            if seen != historicals:
                raise ValueError(f"the coordinator lists historicals {seen}")
            return infos

        infos = wait_for(coordinator_sees, f"the coordinator listing the historicals by tier {historicals}")
        assert {"coordinator", "broker"} <= {i.role for i in infos}, infos

        def broker_sees():
            rows = flight_sql(flight, user, password, "SELECT server_id, server_type, tier FROM sys.servers").to_pylist()
            seen = {r["server_id"]: r["tier"] for r in rows if r["server_type"] == "historical"}
            if seen != historicals:
                raise ValueError(f"sys.servers says {rows}")
            return rows

        wait_for(broker_sees, f"the broker's sys.servers listing the historicals by tier {historicals}")

        def default_rules():
            table = flight_sql(flight, user, password, "SELECT tiered_replicants FROM sys.rules WHERE datasource = '_default'")
            return "hot" in str(table.to_pylist()) and "cold" in str(table.to_pylist())

        wait_for(default_rules, "the _default rules naming tiers hot and cold (set by the one-shot rules container)")

        today = datetime.now(timezone.utc).date()
        recent = demo_table(3_000, start=(today - timedelta(days=3)).isoformat(), days=2)
        old = demo_table(2_000, start="2015-09-12", days=2)
        storage = deep_storage_from_url(deep_storage_url, s3_endpoint)
        new = client.build_and_publish(recent, "deploy_events", storage)
        aged = client.build_and_publish(old, "deploy_events", storage)
        tier_of = dict(historicals)

        def placed():
            status = {str(segment_id_from_proto(s.id)): s for s in client.load_status("deploy_events")}
            got = {}
            for d in new + aged:
                entry = status.get(str(d.id))
                got[str(d.id)] = sorted(tier_of.get(server, server) for server in (entry.servers if entry else []))
            want = {**{str(d.id): ["cold", "hot"] for d in new}, **{str(d.id): ["cold"] for d in aged}}
            if got != want:
                raise ValueError(f"tiers by segment {got}")
            return got

        wait_for(placed, "recent segments on hot and cold, old ones on cold only")

        everything = pa.concat_tables([recent, old])
        duck.register("events", everything)
        expected = duck.execute("SELECT COUNT(*) AS n, SUM(added) AS added FROM events").fetchall()[0]

        def answered():
            got = flight_sql(flight, user, password,
                             "SELECT COUNT(*) AS n, SUM(added) AS added FROM deploy_events").to_pylist()[0]
            if (got["n"], got["added"]) != expected:
                raise ValueError(f"broker says {got}")
            return got

        wait_for(answered, f"the broker answering COUNT(*), SUM(added) = {expected}")
    finally:
        client.close()
