"""`strata up` options reach the node configs it writes (ports are probed, no node starts): the
warm Spark drivers setting is the coordinator's, one by default on the command line, none through
the Python API the tests use."""

from __future__ import annotations

import tomllib

from services.cli.local_cluster import LocalCluster
from services.cli.main import build_parser


def test_up_keeps_one_warm_driver_unless_told_otherwise():
    assert build_parser().parse_args(["up"]).warm_drivers == 1
    assert build_parser().parse_args(["up", "--warm-drivers", "0"]).warm_drivers == 0


def test_the_setting_lands_in_the_coordinator_config(tmp_path, monkeypatch):
    cluster = LocalCluster(str(tmp_path))
    spawned = {}

    def fake_spawn(name, role, conf, node):  # no processes: only the written configs are checked
        with open(conf, "rb") as f:
            spawned[name] = tomllib.load(f)
        raise RuntimeError("stop after the first config")

    monkeypatch.setattr(cluster, "_spawn", fake_spawn)
    try:
        cluster.up(historicals=1, ports="auto", warm_task_drivers=2)
    except RuntimeError:
        pass
    assert spawned["coordinator"]["coordinator"]["warm_task_drivers"] == 2


def test_tiers_land_in_each_historical_config(tmp_path, monkeypatch):
    import pytest

    from common.errors import StrataError
    from services.cli.local_cluster import parse_tiers

    assert parse_tiers("hot=1,cold=2") == ["hot", "cold", "cold"]
    for bad, message in (("hot", "tier=count pairs"), ("hot=0", "at least 1"), ("hot=1,hot=1", "twice"),
                         ("=1", "tier=count pairs"), ("hot=x", "tier=count pairs")):
        with pytest.raises(StrataError, match=message):
            parse_tiers(bad)
    args = build_parser().parse_args(["up", "--tiers", "hot=1,cold=1"])
    assert (args.tiers, args.historicals) == ("hot=1,cold=1", None)

    cluster = LocalCluster(str(tmp_path))
    configs = {}

    def fake_spawn(name, role, conf, node):  # no processes: only the written configs are checked
        with open(conf, "rb") as f:
            configs[name] = tomllib.load(f)
        return {"name": name, "role": role, "pid": 0, "config": conf}

    monkeypatch.setattr(cluster, "_spawn", fake_spawn)
    monkeypatch.setattr(cluster, "_wait_healthy", lambda *a, **k: None)
    cluster.up(historicals=3, ports="auto", tiers=["hot", "cold", "cold"])
    assert [configs[f"historical-{i}"]["historical"]["tier"] for i in (1, 2, 3)] == ["hot", "cold", "cold"]
    with pytest.raises(StrataError, match="--tiers names 2 historicals but --historicals is 3"):
        LocalCluster(str(tmp_path / "other")).up(historicals=3, ports="auto", tiers=["hot", "cold"])
