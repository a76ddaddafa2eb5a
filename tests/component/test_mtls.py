"""A cluster with [tls] mtls = true and [auth] on, and no shared internal secret: every node
presents its certificate (signed by a CA made here with ``cryptography``) as a client certificate,
and that certificate is the internal credential. The cluster publishes, loads and answers queries
this way. The historicals and the coordinator serve only the cluster: a client without a
certificate, or with one another CA signed, fails the TLS handshake there (historical RunQuery,
coordinator publish and segment calls, discovery), while one holding a certificate of the cluster's
CA is internal without any secret. Users still reach the broker (Flight SQL over grpc+tls, the gRPC
BrokerService) with their passwords and no certificate."""

from __future__ import annotations

import json

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as adbc
import grpc
import pytest

from services.grpc_server import channel
from services.historical.client import HistoricalClient
from services.rpc.gen.strata.v1 import (catalog_pb2, catalog_pb2_grpc, coordinator_pb2, coordinator_pb2_grpc,
                                       discovery_pb2, discovery_pb2_grpc)
from services.cli.cluster_client import ClusterClient
from services.transport_security import TransportSecurity, transport_security_for_task
from tests.fixtures.certificates import make_certificates, make_stranger
from tests.harness.secure_cluster import QUERY, READER_PASSWORD, secure_cluster

ADMIN_PASSWORD = "mtls-admin-pw"


@pytest.fixture(scope="module")
def certs() -> dict[str, bytes]:
    return make_certificates()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    # publish (coordinator), discovery and segment loads all run over mTLS, with no secret
    c = secure_cluster(tmp_path_factory.mktemp("mtls"), certs, ADMIN_PASSWORD, 400, mtls=True)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def no_cert(certs) -> TransportSecurity:
    return TransportSecurity(ca=certs["ca"])


@pytest.fixture(scope="module")
def stranger(certs) -> TransportSecurity:
    other = make_stranger()
    return TransportSecurity(cert=other["cert"], key=other["key"], ca=certs["ca"], mtls=True)


@pytest.fixture(scope="module")
def node_cert(certs) -> TransportSecurity:
    """A client holding a certificate the cluster's CA signed, and nothing else."""
    return TransportSecurity(cert=certs["cert"], key=certs["key"], ca=certs["ca"], mtls=True)


def test_the_cluster_runs_on_certificates_alone(cluster, certs):
    for node in (cluster.coordinator, cluster.broker, *cluster.historicals):
        assert node.security.mtls and node.security.internal_secret == ""
    uri = f"grpc+tls://127.0.0.1:{cluster.broker.flight.port}"
    with adbc.connect(uri, db_kwargs={"username": "reader", "password": READER_PASSWORD,
                                      adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: certs["ca"].decode()},
                      autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM wiki")  # broker -> historical RunQuery over mTLS
        assert cur.fetchall() == [(cluster.rows,)]


def _run_query(cluster, security: TransportSecurity):
    target = f"127.0.0.1:{cluster.historicals[0].grpc.port}"
    sids = [s for s in cluster.historicals[0].node.status()["served"] if s.datasource == "wiki"]
    client = HistoricalClient(target, security)
    try:
        schema = cluster.broker.catalog.datasource_schema("wiki")
        return client.read_partial(client.run_query(json.dumps(QUERY), "direct", sids, schema, timeout_s=30))
    finally:
        client.close()


def test_run_query_needs_a_certificate_from_the_clusters_ca(cluster, no_cert, stranger, node_cert):
    for outsider in (no_cert, stranger):  # the TLS handshake refuses both
        with pytest.raises(grpc.RpcError) as err:
            _run_query(cluster, outsider)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    partial = _run_query(cluster, node_cert)
    assert partial.table.column("rows").to_pylist() == [cluster.rows]


def test_users_reach_the_broker_without_a_certificate(cluster, no_cert):
    client = ClusterClient(broker=f"127.0.0.1:{cluster.broker.grpc.port}", credentials=("reader", READER_PASSWORD),
                           security=no_cert)
    try:
        table, _ = client.native(QUERY, timeout_s=30)
        assert table.column("rows").to_pylist() == [cluster.rows]
    finally:
        client.close()


def test_interceptor_admits_only_certificates_the_ca_signed(certs):
    """The check behind the handshake: a certificate another CA signed is not internal even if a
    server were configured to let it connect."""
    from services.transport_security import InternalCredentialInterceptor

    interceptor = InternalCredentialInterceptor("", ca=certs["ca"])

    class Context:
        def __init__(self, pem):
            self._pem = pem

        def auth_context(self):
            return {"x509_pem_cert": [self._pem]} if self._pem else {}

        def invocation_metadata(self):
            return ()

    assert interceptor.internal_call(Context(certs["cert"]))
    assert not interceptor.internal_call(Context(make_stranger()["cert"]))
    assert not interceptor.internal_call(Context(None))
    assert not interceptor.internal_call(Context(b"not a certificate"))


def _coordinator_calls(ch):
    coordinator = coordinator_pb2_grpc.CoordinatorServiceStub(ch)
    discovery = discovery_pb2_grpc.DiscoveryServiceStub(ch)
    return [(coordinator.PublishSegments, coordinator_pb2.PublishSegmentsRequest()),
            (coordinator.AllocateSegments, coordinator_pb2.AllocateSegmentsRequest()),
            (coordinator.ListSegments, coordinator_pb2.ListSegmentsRequest(datasource="wiki")),
            (discovery.GetPrefix, discovery_pb2.KeyRequest(key="/"))]


def test_coordinator_and_discovery_need_a_certificate(cluster, no_cert, stranger, node_cert):
    target = f"127.0.0.1:{cluster.coordinator.grpc.port}"
    for outsider in (no_cert, stranger):
        with channel(target, outsider) as ch:
            for call, request in _coordinator_calls(ch):
                with pytest.raises(grpc.RpcError) as err:
                    call(request, timeout=10)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE, call
    with channel(target, node_cert) as ch:
        coordinator = coordinator_pb2_grpc.CoordinatorServiceStub(ch)
        listed = coordinator.ListSegments(coordinator_pb2.ListSegmentsRequest(datasource="wiki"), timeout=10)
        assert listed.segments and all(r.descriptor.id.datasource == "wiki" for r in listed.segments)
        keys = discovery_pb2_grpc.DiscoveryServiceStub(ch).GetPrefix(discovery_pb2.KeyRequest(key="/"), timeout=10)
        assert keys is not None
        # The catalog treats a certified call without a user as the cluster's own (a task).
        with pytest.raises(grpc.RpcError) as err:
            catalog_pb2_grpc.CatalogServiceStub(ch).GetTable(
                catalog_pb2.GetTableRequest(id=catalog_pb2.TableId(schema="druid", name="nothing")), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_task_processes_get_the_certificate(cluster):
    security = transport_security_for_task(cluster.coordinator.task_runner.env)
    assert security.mtls and security.cert and not security.internal_secret
    with channel(cluster.coordinator.task_runner.coordinator_target(), security) as ch:
        coordinator_pb2_grpc.CoordinatorServiceStub(ch).ListTasks(coordinator_pb2.ListTasksRequest(), timeout=10)


def test_mtls_needs_cert_key_and_ca():
    from types import SimpleNamespace

    from common.errors import ValidationError
    from services.transport_security import transport_security_from_config

    config = SimpleNamespace(tls=SimpleNamespace(cert="C", key="K", ca="", mtls=True),
                             auth=SimpleNamespace(enabled=True, internal_secret="", admin_password="pw"))
    with pytest.raises(ValidationError, match="mtls needs cert, key and ca"):
        transport_security_from_config(config)
