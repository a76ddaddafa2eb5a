"""A cluster with [tls] and [auth] on: every node serves gRPC, Flight (grpc+tls://) and HTTP
(https) with a certificate signed by a CA made here with the ``cryptography`` package, and the
nodes' own RPCs carry the cluster's internal credential. Clients: the ADBC Flight SQL driver with
the CA as its root certificates, gRPC health and ClusterClient over TLS, urllib over https; and
direct calls to a historical's RunQuery and the coordinator's services, refused without the
internal credential (a user's own password is not enough) and answered with it."""

from __future__ import annotations

import json
import ssl
import urllib.request

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as adbc
import grpc
import pyarrow.flight as flight
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.cli.cluster_client import ClusterClient, ClusterError
from services.grpc_server import channel
from services.historical.client import HistoricalClient
from services.rpc.gen.strata.v1 import (coordinator_pb2, coordinator_pb2_grpc, discovery_pb2, discovery_pb2_grpc,
                                       historical_pb2, historical_pb2_grpc)
from services.security.basic_authorizer import basic_header
from services.transport_security import TransportSecurity
from tests.fixtures.certificates import make_certificates
from tests.harness.secure_cluster import QUERY, READER_PASSWORD, secure_cluster

ADMIN_PASSWORD = "tls-admin-pw"


@pytest.fixture(scope="module")
def certs() -> dict[str, bytes]:
    return make_certificates()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    # publish and load run over TLS + the internal credential
    c = secure_cluster(tmp_path_factory.mktemp("tls"), certs, ADMIN_PASSWORD, 500)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def ca_only(certs) -> TransportSecurity:
    """What a user's client knows: the CA, no internal credential."""
    return TransportSecurity(ca=certs["ca"])


def test_adbc_flight_sql_over_grpc_tls(cluster, certs):
    uri = f"grpc+tls://127.0.0.1:{cluster.broker.flight.port}"
    assert cluster.broker.endpoints()["flight"].startswith("grpc+tls://")
    with adbc.connect(uri, db_kwargs={"username": "reader", "password": READER_PASSWORD,
                                      adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: certs["ca"].decode()},
                      autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM wiki")
        assert cur.fetchall() == [(cluster.rows,)]


def test_flight_client_that_does_not_trust_the_ca_is_refused(cluster):
    client = flight.FlightClient(f"grpc+tls://127.0.0.1:{cluster.broker.flight.port}")
    try:
        with pytest.raises(flight.FlightUnavailableError):  # the handshake fails: certificate verify failed
            list(client.list_actions(flight.FlightCallOptions(timeout=10)))
    finally:
        client.close()


def test_grpc_health_and_broker_queries_over_tls(cluster, ca_only):
    for node in (cluster.coordinator, cluster.broker, *cluster.historicals):
        with channel(f"127.0.0.1:{node.grpc.port}", ca_only) as ch:
            response = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert response.status == health_pb2.HealthCheckResponse.SERVING
    client = ClusterClient(broker=f"127.0.0.1:{cluster.broker.grpc.port}", credentials=("reader", READER_PASSWORD),
                           security=ca_only)
    try:
        table, _ = client.native(QUERY, timeout_s=30)
        assert table.column("rows").to_pylist() == [cluster.rows]
    finally:
        client.close()


def test_https_status_health_on_every_node(cluster, certs):
    context = ssl.create_default_context(cadata=certs["ca"].decode())
    for node in (cluster.coordinator, cluster.broker, *cluster.historicals):
        url = node.endpoints()["http"] + "/status/ready"
        assert url.startswith("https://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            assert json.loads(response.read())["healthy"] is True
    with pytest.raises(OSError):  # plain http to a TLS port gets no answer (the connection is dropped)
        urllib.request.urlopen(f"http://127.0.0.1:{cluster.broker.http.port}/status/health", timeout=10).read()


def test_router_serves_https_and_forwards_over_tls(cluster, certs):
    router = cluster.router or cluster.start_router()
    context = ssl.create_default_context(cadata=certs["ca"].decode())
    assert router.console_url().startswith("https://127.0.0.1:")
    with urllib.request.urlopen(router.console_url(), timeout=10, context=context) as page:
        assert b"console.js" in page.read()
    auth = {"Authorization": basic_header("admin", ADMIN_PASSWORD), "Content-Type": "application/json"}
    query = urllib.request.Request(router.console_url() + "druid/v2/sql", headers=auth,
                                   data=json.dumps({"query": "SELECT COUNT(*) AS n FROM wiki"}).encode())
    with urllib.request.urlopen(query, timeout=30, context=context) as answer:  # router -> broker over https
        assert json.loads(answer.read()) == [{"n": cluster.rows}]
    listing = urllib.request.Request(router.console_url() + "druid/coordinator/v1/datasources", headers=auth)
    with urllib.request.urlopen(listing, timeout=30, context=context) as answer:  # -> the coordinator over https
        assert json.loads(answer.read()) == ["wiki"]


def _run_query(cluster, historical: HistoricalClient, once: bool = False):
    sids = [s for s in cluster.historicals[0].node.status()["served"] if s.datasource == "wiki"]
    schema = cluster.broker.catalog.datasource_schema("wiki")
    if once:  # RunQueryOnce, as the broker asks
        return historical.ask(json.dumps(QUERY), "direct", sids, schema, timeout_s=30).read()
    return historical.read_partial(historical.run_query(json.dumps(QUERY), "direct", sids, schema, timeout_s=30))


def test_direct_run_query_needs_the_internal_credential(cluster, ca_only):
    target = f"127.0.0.1:{cluster.historicals[0].grpc.port}"
    outsider = HistoricalClient(target, ca_only)
    try:
        for once in (False, True):
            with pytest.raises(grpc.RpcError) as err:
                _run_query(cluster, outsider, once)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "internal credential" in err.value.details()
    finally:
        outsider.close()
    # The admin's own password does not open a historical either.
    stub_channel = channel(target, ca_only)
    try:
        stub = historical_pb2_grpc.HistoricalServiceStub(stub_channel)
        with pytest.raises(grpc.RpcError) as err:
            list(stub.RunQuery(historical_pb2.RunQueryRequest(query_json=json.dumps(QUERY), query_id="direct"),
                               timeout=30, metadata=[("authorization", basic_header("admin", ADMIN_PASSWORD))]))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        stub_channel.close()
    # With the cluster's credential (what the broker holds) the same call answers.
    insider = HistoricalClient(target, cluster.broker.security)
    try:
        partial = _run_query(cluster, insider)
        assert partial.table.column("rows").to_pylist() == [cluster.rows]
        # RunQueryOnce over TLS, the credential added by the channel's interceptor.
        assert _run_query(cluster, insider, once=True).table.column("rows").to_pylist() == [cluster.rows]
    finally:
        insider.close()


def test_coordinator_and_discovery_need_the_internal_credential_or_the_admin(cluster, ca_only):
    target = f"127.0.0.1:{cluster.coordinator.grpc.port}"
    with channel(target, ca_only) as ch:
        coordinator = coordinator_pb2_grpc.CoordinatorServiceStub(ch)
        discovery = discovery_pb2_grpc.DiscoveryServiceStub(ch)
        reader = (("authorization", basic_header("reader", READER_PASSWORD)),)
        for metadata in ((), reader):
            for call, request in ((coordinator.PublishSegments, coordinator_pb2.PublishSegmentsRequest()),
                                  (coordinator.AllocateSegments, coordinator_pb2.AllocateSegmentsRequest()),
                                  (coordinator.UpdateTask, coordinator_pb2.UpdateTaskRequest(id="x")),
                                  (coordinator.ListSegments, coordinator_pb2.ListSegmentsRequest(datasource="wiki")),
                                  (discovery.GetPrefix, discovery_pb2.KeyRequest(key="/"))):
                with pytest.raises(grpc.RpcError) as err:
                    call(request, timeout=10, metadata=metadata)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, call
        # The task calls admit users, and check their grants (tests/component/test_security.py).
        with pytest.raises(grpc.RpcError) as err:
            coordinator.SubmitTask(coordinator_pb2.SubmitTaskRequest(datasource="wiki"), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            coordinator.SubmitTask(coordinator_pb2.SubmitTaskRequest(datasource="wiki", type="compact"), timeout=10,
                                   metadata=reader)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # The admin's command line keeps working on the coordinator.
        admin = (("authorization", basic_header("admin", ADMIN_PASSWORD)),)
        listed = coordinator.ListSegments(coordinator_pb2.ListSegmentsRequest(datasource="wiki"), timeout=10,
                                          metadata=admin)
        assert listed.segments and all(r.descriptor.id.datasource == "wiki" for r in listed.segments)
    admin_cli = ClusterClient(target, credentials=("admin", ADMIN_PASSWORD), security=ca_only)
    try:
        assert {t.datasource for t in admin_cli.tasks()} <= {"wiki"}
    finally:
        admin_cli.close()
    reader_cli = ClusterClient(target, credentials=("reader", READER_PASSWORD), security=ca_only)
    try:
        with pytest.raises(ClusterError, match="PERMISSION_DENIED: user 'reader' may not WRITE datasource 'wiki'"):
            reader_cli.submit_task("wiki", "compact", "COMPACT wiki")
    finally:
        reader_cli.close()


def test_catalog_reads_with_the_internal_credential_act_as_the_admin(cluster, ca_only):
    """What a compaction task does to read a table's projections: no user, the cluster's credential."""
    from services.rpc.gen.strata.v1 import catalog_pb2, catalog_pb2_grpc

    target = f"127.0.0.1:{cluster.coordinator.grpc.port}"
    with channel(target, ca_only) as outsider, channel(target, cluster.coordinator.security) as insider:
        get = catalog_pb2.GetTableRequest(id=catalog_pb2.TableId(schema="druid", name="no_such_table"))
        with pytest.raises(grpc.RpcError) as err:
            catalog_pb2_grpc.CatalogServiceStub(outsider).GetTable(get, timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:  # past authentication: the table is simply not there
            catalog_pb2_grpc.CatalogServiceStub(insider).GetTable(get, timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_task_processes_reach_the_coordinator_with_what_it_hands_them(cluster):
    """A task process builds its channel from the environment its coordinator gives it
    (services/ingestion/task_main.py): TLS with the CA, and the internal credential."""
    from services.rpc.gen.strata.v1 import catalog_pb2, catalog_pb2_grpc
    from services.transport_security import transport_security_for_task

    security = transport_security_for_task(cluster.coordinator.task_runner.env)
    assert security.tls and security.internal_secret
    with channel(cluster.coordinator.task_runner.coordinator_target(), security) as ch:
        coordinator_pb2_grpc.CoordinatorServiceStub(ch).ListTasks(coordinator_pb2.ListTasksRequest(), timeout=10)
        with pytest.raises(grpc.RpcError) as err:  # a compaction task reading its table's projections
            catalog_pb2_grpc.CatalogServiceStub(ch).GetTable(
                catalog_pb2.GetTableRequest(id=catalog_pb2.TableId(schema="druid", name="wiki")), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND  # authenticated; wiki has no catalog entry


def test_catalog_ddl_reaches_the_coordinator_over_tls(cluster, certs):
    """DDL goes broker -> coordinator over gRPC (CatalogClient), and the broker's catalog cache reads
    it back over https: both verify the coordinator's certificate with the CA."""
    uri = f"grpc+tls://127.0.0.1:{cluster.broker.flight.port}"
    with adbc.connect(uri, db_kwargs={"username": "admin", "password": ADMIN_PASSWORD,
                                      adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: certs["ca"].decode()},
                      autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE planned_tls (__time TIMESTAMP, region VARCHAR) PARTITIONED BY HOUR")
        cur.fetchall()
    assert cluster.broker.catalog_cache.coordinator_http().startswith("https://")
    cluster.broker.catalog_cache.flush()
    assert cluster.broker.catalog_cache.spec("druid", "planned_tls") is not None
