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
