"""auth_cluster: an embedded cluster with authentication on and two users, the admin (``ADMIN``)
and ``READER``, who may read 'wiki' only. The security, router, console and TLS tests share it;
each publishes its own data."""

from __future__ import annotations

from tests.harness.embedded_cluster import EmbeddedCluster

ADMIN = ("admin", "admin-pw")
READER = ("reader", "reader-pw")
USERS_FILE = f'''
[[users]]
name = "{READER[0]}"
password = "{READER[1]}"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "wiki"
'''


def auth_cluster(directory, admin_password: str = ADMIN[1], **options) -> EmbeddedCluster:
    """Started in ``directory`` (a pathlib.Path), one historical; ``options`` go to EmbeddedCluster
    (``tls=...``, ``coordinator=...``). The caller stops it."""
    users = directory / "users.toml"
    users.write_text(USERS_FILE)
    return EmbeddedCluster(str(directory / "cluster"), historicals=1,
                           auth={"enabled": True, "admin_password": admin_password, "users_file": str(users)},
                           **options)
