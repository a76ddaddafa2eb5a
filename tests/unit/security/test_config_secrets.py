"""Secrets in node config come from files or the environment, never need to sit in the TOML, and
never show in a printed config or in an error."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from services.node_config import load_config
from services.security import authorizer_from_config


def test_a_secret_from_a_file_named_by_the_environment(tmp_path):
    secret = tmp_path / "admin-password"
    secret.write_text("from-a-mounted-secret\n")  # as kubectl create secret writes it, newline and all
    config = load_config("broker", None, env={"STRATA_AUTH_ENABLED": "true",
                                              "STRATA_AUTH_ADMIN_PASSWORD_FILE": str(secret)})
    assert config.auth.admin_password == "from-a-mounted-secret"
    auth = authorizer_from_config(config)
    assert auth.authenticate("admin", "from-a-mounted-secret") and not auth.authenticate("admin", "")


def test_a_secret_from_a_file_named_in_the_toml_and_the_order_of_sources(tmp_path):
    (tmp_path / "url").write_text("postgresql+psycopg://strata:pw@db/strata")
    conf = tmp_path / "node.toml"
    conf.write_text(f'[metadata]\nurl_file = "{tmp_path / "url"}"\n')
    assert load_config("coordinator", str(conf), env={}).metadata.url == "postgresql+psycopg://strata:pw@db/strata"
    # The variable wins over its file, which wins over the TOML.
    (tmp_path / "other").write_text("sqlite:///other.db")
    env = {"STRATA_METADATA_URL_FILE": str(tmp_path / "other")}
    assert load_config("coordinator", str(conf), env=env).metadata.url == "sqlite:///other.db"
    env["STRATA_METADATA_URL"] = "sqlite:///env.db"
    assert load_config("coordinator", str(conf), env=env).metadata.url == "sqlite:///env.db"


def test_an_unreadable_secret_file_is_named_without_its_content(tmp_path):
    with pytest.raises(ValidationError, match="STRATA_AUTH_ADMIN_PASSWORD_FILE: cannot read '.*missing'"):
        load_config("broker", None, env={"STRATA_AUTH_ADMIN_PASSWORD_FILE": str(tmp_path / "missing")})
    conf = tmp_path / "node.toml"
    conf.write_text("[auth]\nadmin_password_file = 3\n")
    with pytest.raises(ValidationError, match=r"\[auth\] admin_password_file must be the path"):
        load_config("broker", str(conf), env={})
    conf.write_text("[auth]\nadmin_pasword_file = 'x'\n")
    with pytest.raises(ValidationError, match=r"unknown keys \['admin_pasword_file'\]"):
        load_config("broker", str(conf), env={})


def test_the_admin_password_is_not_in_a_printed_config():
    config = load_config("broker", None, env={"STRATA_AUTH_ADMIN_PASSWORD": "hunter2-secret"})
    assert config.auth.admin_password == "hunter2-secret"
    assert "hunter2-secret" not in repr(config) and "hunter2-secret" not in str(config.auth)
