"""[tls] mtls from a node's config: which servers require a client certificate, what the internal
credential becomes, and the command line's client certificate from the environment."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from services.node_config import load_config
from services.transport_security import (task_env, transport_security_for_task, transport_security_from_config,
                                         transport_security_from_env)

MTLS = {"STRATA_TLS_CERT": "CERT", "STRATA_TLS_KEY": "KEY", "STRATA_TLS_CA": "CA", "STRATA_TLS_MTLS": "true",
        "STRATA_AUTH_ENABLED": "true", "STRATA_AUTH_ADMIN_PASSWORD": "pw"}


@pytest.mark.parametrize("role,requires", [("coordinator", True), ("historical", True), ("broker", False)])
def test_only_the_clusters_own_servers_require_a_certificate(role, requires):
    security = transport_security_from_config(load_config(role, env=MTLS))
    assert security.mtls and security.require_client_cert is requires
    assert security.guards_internal  # auth on: the certificate is the credential


def test_no_secret_is_derived_from_the_admin_password_with_mtls():
    assert transport_security_from_config(load_config("historical", env=MTLS)).internal_secret == ""
    explicit = transport_security_from_config(load_config("historical", env={**MTLS,
                                                                            "STRATA_AUTH_INTERNAL_SECRET": "s"}))
    assert explicit.internal_secret == "s"  # still accepted while rolling over


def test_without_auth_nothing_is_guarded():
    security = transport_security_from_config(load_config("historical", env={**MTLS, "STRATA_AUTH_ENABLED": "false"}))
    assert security.mtls and not security.guards_internal


@pytest.mark.parametrize("missing", ["STRATA_TLS_CA", "STRATA_TLS_CERT"])
def test_mtls_needs_cert_key_and_ca(missing):
    env = {k: v for k, v in MTLS.items() if k != missing}
    if missing == "STRATA_TLS_CERT":
        env.pop("STRATA_TLS_KEY")
    with pytest.raises(ValidationError, match="mtls needs cert, key and ca"):
        transport_security_from_config(load_config("historical", env=env))


def test_tasks_get_the_certificate_to_present():
    security = transport_security_for_task(task_env(transport_security_from_config(load_config("coordinator",
                                                                                            env=MTLS))))
    assert security.mtls and (security.cert, security.key, security.ca) == (b"CERT", b"KEY", b"CA")


def test_command_line_client_certificate(tmp_path):
    for name in ("ca", "cert", "key"):
        (tmp_path / f"{name}.pem").write_text(name.upper())
    env = {"STRATA_TLS_CA_FILE": str(tmp_path / "ca.pem"), "STRATA_TLS_CERT_FILE": str(tmp_path / "cert.pem"),
           "STRATA_TLS_KEY_FILE": str(tmp_path / "key.pem")}
    security = transport_security_from_env(env)
    assert security.mtls and (security.cert, security.key, security.ca) == (b"CERT", b"KEY", b"CA")
    assert not transport_security_from_env({"STRATA_TLS_CA_FILE": env["STRATA_TLS_CA_FILE"]}).mtls
    with pytest.raises(ValidationError, match="set both"):
        transport_security_from_env({**env, "STRATA_TLS_KEY_FILE": ""})
