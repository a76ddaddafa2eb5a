"""secure_cluster: an embedded cluster with auth on (an admin and a reader of 'wiki') and TLS
from certificate files, as a deployment gives them ([tls] cert_file/key_file/ca_file), with
'wiki' published and queryable. The TLS and mTLS component tests share it."""

from __future__ import annotations

from common.demo import table as demo_table
from tests.harness.auth_cluster import READER, auth_cluster
from tests.harness.embedded_cluster import EmbeddedCluster

READER_PASSWORD = READER[1]
QUERY = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
         "granularity": "all", "aggregations": [{"type": "count", "name": "rows"}]}


def secure_cluster(directory, certs: dict[str, bytes], admin_password: str, rows: int, **tls) -> EmbeddedCluster:
    """Started, with ``rows`` demo rows in 'wiki' loaded (publish and load run over TLS); extra
    ``[tls]`` keys (``mtls=True``) go to every node. The caller stops it."""
    for name, data in certs.items():
        (directory / f"{name}.pem").write_bytes(data)
    files = {f"{name}_file": str(directory / f"{name}.pem") for name in certs}
    c = auth_cluster(directory, admin_password, tls={**files, **tls})
    try:
        data = demo_table(rows, days=1)
        c.rows = data.num_rows
        c.wait_queryable("wiki", len(c.publish(data, "wiki")))
    except BaseException:
        c.stop()
        raise
    return c
