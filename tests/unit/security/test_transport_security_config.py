"""[tls] and the internal credential from a node's config: files, environment, refusals."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from services.node_config import load_config
from services.transport_security import (INTERNAL_METADATA, NO_SECURITY, task_env, transport_security_for_task,
                                          transport_security_from_config, transport_security_from_env)


def test_tls_is_off_and_calls_carry_nothing_by_default():
    security = transport_security_from_config(load_config("broker", env={}))
    assert security == NO_SECURITY and not security.tls and security.call_metadata() == ()
    assert security.flight_location("h", 1) == "grpc://h:1" and security.http_scheme == "http"


def test_cert_and_key_files_in_toml_and_env(tmp_path):
    (tmp_path / "c.pem").write_text("CERT\n")
    (tmp_path / "k.pem").write_text("KEY\n")
    (tmp_path / "ca.pem").write_text("CA\n")
    conf = tmp_path / "node.toml"
    conf.write_text(f'[tls]\ncert_file = "{tmp_path / "c.pem"}"\nkey_file = "{tmp_path / "k.pem"}"\n')
    security = transport_security_from_config(
        load_config("historical", str(conf), env={"STRATA_TLS_CA_FILE": str(tmp_path / "ca.pem")}))
    assert (security.cert, security.key, security.ca) == (b"CERT", b"KEY", b"CA")
    assert security.serves_tls and security.flight_location("h", 1) == "grpc+tls://h:1"
    assert security.http_scheme == "https"
    assert "CERT" not in repr(load_config("historical", str(conf), env={}))  # PEM text is never printed


def test_a_cert_without_its_key_is_refused():
    with pytest.raises(ValidationError, match=r"\[tls\].*both cert and key"):
        transport_security_from_config(load_config("broker", env={"STRATA_TLS_CERT": "x"}))


def test_missing_cert_file_names_the_setting(tmp_path):
    with pytest.raises(ValidationError, match="STRATA_TLS_KEY_FILE.*nope.pem"):
        load_config("broker", env={"STRATA_TLS_KEY_FILE": str(tmp_path / "nope.pem")})


def test_internal_secret_given_or_derived_from_the_admin_password():
    on = {"STRATA_AUTH_ENABLED": "true", "STRATA_AUTH_ADMIN_PASSWORD": "pw"}
    derived = transport_security_from_config(load_config("broker", env=on))
    again = transport_security_from_config(load_config("historical", env=on))
    other = transport_security_from_config(load_config("broker", env={**on, "STRATA_AUTH_ADMIN_PASSWORD": "pw2"}))
    assert derived.internal_secret == again.internal_secret != other.internal_secret
    assert "pw" not in derived.internal_secret  # a one-way derivation, not the password itself
    given = transport_security_from_config(load_config("broker", env={**on, "STRATA_AUTH_INTERNAL_SECRET": "s3"}))
    assert given.call_metadata() == ((INTERNAL_METADATA, "s3"),)
    # Off: no credential, whatever is configured.
    assert transport_security_from_config(load_config("broker", env={"STRATA_AUTH_ADMIN_PASSWORD": "pw"})) \
        .internal_secret == ""


def test_auth_on_without_any_secret_is_refused():
    with pytest.raises(ValidationError, match="internal_secret"):
        transport_security_from_config(load_config("historical", env={"STRATA_AUTH_ENABLED": "true"}))


def test_task_processes_inherit_the_coordinators_view():
    on = {"STRATA_AUTH_ENABLED": "true", "STRATA_AUTH_INTERNAL_SECRET": "s3", "STRATA_TLS_CERT": "C",
          "STRATA_TLS_KEY": "K", "STRATA_TLS_CA": "CA"}
    coordinator = transport_security_from_config(load_config("coordinator", env=on))
    task = transport_security_for_task(task_env(coordinator))
    assert task.tls and task.ca == b"CA" and task.internal_secret == "s3" and not task.serves_tls
    assert transport_security_for_task({}) == NO_SECURITY
    system_roots = transport_security_for_task({"STRATA_TASK_TLS": "1"})
    assert system_roots.tls and not system_roots.ca and not system_roots.serves_tls


def test_cli_trusts_the_ca_file_in_its_environment(tmp_path):
    (tmp_path / "ca.pem").write_bytes(b"CA")
    assert transport_security_from_env({"STRATA_TLS_CA_FILE": str(tmp_path / "ca.pem")}).ca == b"CA"
    assert transport_security_from_env({}) == NO_SECURITY
    with pytest.raises(ValidationError, match="STRATA_TLS_CA_FILE"):
        transport_security_from_env({"STRATA_TLS_CA_FILE": str(tmp_path / "missing.pem")})
