"""``strata catalog ...`` against a real coordinator's REST API."""

from __future__ import annotations

import argparse
import json

import pytest

from common.catalog import TableId
from services.cli.catalog_command import CatalogRequestError, CatalogRestClient, register, run_catalog


@pytest.fixture(scope="module")
def parser():
    p = argparse.ArgumentParser(prog="strata")
    register(p.add_subparsers(dest="command", required=True))
    return p


@pytest.fixture
def cli(parser, coordinator, capsys):
    url = f"http://127.0.0.1:{coordinator.http.port}"

    def run(*argv: str) -> str:
        args = parser.parse_args(["catalog", "--coordinator-http", url, *argv])
        assert args.func.__name__ == "cmd_catalog"
        assert run_catalog(CatalogRestClient(url, timeout_s=10), args) == 0
        return capsys.readouterr().out

    return run


def test_cli_round_trip(cli, tmp_path, name):
    spec = {"type": "datasource", "properties": {"segmentGranularity": "DAY"},
            "columns": [{"name": "a", "sqlType": "VARCHAR"}, {"name": "b", "sqlType": "BIGINT"},
                        {"name": "c"}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert f"created druid.{name} version" in cli("create", name, "--spec", str(path))
    assert json.loads(cli("get", name)) == spec
    meta = json.loads(cli("get", f"druid.{name}", "--metadata"))
    assert meta["spec"] == spec and meta["id"] == {"schema": "druid", "name": name}
    assert "updated" in cli("update", name, "--spec", '{"properties": {"targetSegmentRows": 9}}', "--version",
                            str(meta["updateTime"]))
    assert "moved c first" in cli("move", name, "c", "first")
    assert "moved a after b" in cli("move", name, "a", "after", "b")
    assert "hid x" in cli("hide", name, "x", "--unhide", "y")
    assert "dropped b" in cli("drop-column", name, "b")
    got = json.loads(cli("get", name))
    assert [c["name"] for c in got["columns"]] == ["c", "a"]
    assert got["properties"] == {"segmentGranularity": "DAY", "targetSegmentRows": 9, "hiddenColumns": ["x"]}
    assert f"druid.{name}\tdatasource" in cli("list", "--schema", "druid")
    assert cli("schemas").split() == ["druid", "ext"]
    assert "re-announced" in cli("flush")
    assert f"dropped druid.{name}" in cli("drop", name)
    assert f"no entry for druid.{name}" in cli("drop", name, "--if-exists")


def test_cli_ddl(cli, name):
    assert f"created table druid.{name}" in cli("ddl", f"CREATE TABLE {name} (a VARCHAR) PARTITIONED BY HOUR")
    assert f"altered table druid.{name}" in cli("ddl", f"ALTER TABLE {name} ADD COLUMN n BIGINT, MOVE COLUMN n FIRST")
    assert [c["name"] for c in json.loads(cli("get", name))["columns"]] == ["n", "a"]
    assert "created table ext." in cli("ddl", f"CREATE EXTERNAL TABLE {name}_in (x VARCHAR) WITH (source = 'inline', "
                                              "format = 'csv', data = 'a')")
    assert f"dropped table druid.{name}" in cli("ddl", f"DROP TABLE {name}")


def test_cli_errors_carry_status_and_version(coordinator, name):
    client = CatalogRestClient(f"http://127.0.0.1:{coordinator.http.port}", timeout_s=10)
    version = client.create(TableId("druid", name), {"type": "datasource"})
    client.update(TableId("druid", name), {"properties": {"sealed": True}})
    with pytest.raises(CatalogRequestError) as err:
        client.update(TableId("druid", name), {"properties": {"sealed": False}}, version=version)
    assert err.value.status == 409 and err.value.current_version > version
    with pytest.raises(CatalogRequestError) as err:
        client.get_spec(TableId("druid", f"{name}_missing"))
    assert err.value.status == 404
    with pytest.raises(CatalogRequestError) as err:
        client.create(TableId("druid", name + "_x"), {"type": "datasource", "properties": {"sealed": "yes"}})
    assert err.value.status == 400 and "'sealed' must be true or false" in str(err.value)
