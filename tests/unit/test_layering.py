"""The layering rules docs/architecture.md states, enforced on the source (ast only, nothing runs).

- ``common`` never imports ``services``, nor grpc or protobuf (RPC lives in ``services/rpc``);
- ``services/<role>/core`` (pure logic) never imports grpc, asyncio, pyspark or ``services.rpc``;
- within ``common``, each package imports only the packages its row in the architecture table
  allows (segment and types know nothing of queries, SQL or RPC);
- roles talk to each other through per-role clients, never through the command line's
  ``ClusterClient`` (no module outside ``services/cli`` imports ``services.cli``);
- no grab-bag modules (utils.py, helpers.py), and every package says what lives in it;
- no cache outside the runtime: no OrderedDict LRU, functools cache or id()-keyed state but in
  the listed modules (common/bounded_cache.py is the one cache class).
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# common/<package> -> the common packages it may import (besides itself and common.errors).
ALLOWED_COMMON = {
    "types": set(),
    "json": {"types"},
    "segment": {"types", "json"},
    "expr": {"types", "json"},
    "query": {"segment", "expr", "types", "json"},
    "catalog": {"types", "query", "segment", "expr", "json"},
    "sql": {"query", "expr", "types", "catalog", "segment", "json"},
    "demo": {"types"},
}
# Leaf modules of common/ that every package may import (they import nothing of common).
LEAVES = ("errors", "bounded_cache")
IO_LIBRARIES = ("grpc", "asyncio", "pyspark")
RPC_LIBRARIES = ("grpc", "grpc_tools", "grpc_health", "grpc_reflection", "google.protobuf")


def modules(top: str):
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = [d for d in dirnames if d not in ("gen", "__pycache__")]
        for name in filenames:
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def imports(path: str) -> list[tuple[int, str]]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


COMMON = sorted(modules("common"))
SERVICES = sorted(modules("services"))


def test_common_never_imports_services():
    bad = [f"{m}:{line} imports {name}" for m in COMMON for line, name in imports(m)
           if name == "services" or name.startswith("services.")]
    assert bad == [], "common/ must not import services/:\n" + "\n".join(bad)


def _is_rpc(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in RPC_LIBRARIES) or \
        name == "services.rpc" or name.startswith("services.rpc.")


def test_common_never_imports_rpc():
    stale = [m for m in COMMON if m.startswith(os.path.join("common", "rpc") + os.sep)]
    assert stale == [], f"RPC code (generated or not) lives in services/rpc: {stale}"
    bad = [f"{m}:{line} imports {name}" for m in COMMON for line, name in imports(m) if _is_rpc(name)]
    assert bad == [], "common/ must not import grpc, protobuf or services.rpc:\n" + "\n".join(bad)


def test_service_cores_do_no_io():
    cores = [m for m in SERVICES if f"{os.sep}core{os.sep}" in m]
    assert cores, "no services/*/core modules found"
    bad = [f"{m}:{line} imports {name}" for m in cores for line, name in imports(m)
           if name.split(".")[0] in IO_LIBRARIES or _is_rpc(name)]
    assert bad == [], "services/*/core must stay pure (no grpc, asyncio, pyspark, services.rpc):\n" + "\n".join(bad)


@pytest.mark.parametrize("package", sorted(ALLOWED_COMMON))
def test_common_packages_import_only_what_they_may(package):
    allowed = ALLOWED_COMMON[package] | {package}
    bad = []
    for m in COMMON:
        parts = m.split(os.sep)
        if len(parts) < 3 or parts[1] != package:
            continue
        for line, name in imports(m):
            segs = name.split(".")
            if segs[0] == "common" and len(segs) > 1 and segs[1] not in allowed and segs[1] not in LEAVES:
                bad.append(f"{m}:{line} imports {name}")
    assert bad == [], f"common/{package} may import only {sorted(allowed)}:\n" + "\n".join(bad)


def test_roles_never_use_the_command_lines_client():
    outside = [m for m in SERVICES if not m.startswith(os.path.join("services", "cli") + os.sep)]
    bad = [f"{m}:{line} imports {name}" for m in outside for line, name in imports(m)
           if name == "services.cli" or name.startswith("services.cli.")]
    assert bad == [], "use services/<role>/client.py, not the CLI's ClusterClient:\n" + "\n".join(bad)


def test_no_grab_bag_modules_and_every_package_says_what_it_holds():
    grab = [m for m in COMMON + SERVICES if os.path.basename(m) in ("utils.py", "helpers.py")]
    assert grab == [], f"name modules after what they define: {grab}"
    silent = []
    for m in COMMON + SERVICES:
        if os.path.basename(m) == "__init__.py":
            with open(os.path.join(ROOT, m), encoding="utf-8") as f:
                if ast.get_docstring(ast.parse(f.read())) is None:
                    silent.append(m)
    assert silent == [], f"packages without a docstring saying what lives there: {silent}"


# Where kept state may live (issue 24): the one bounded cache class, the node's memory budget of
# decoded parts, the on-disk segment cache's plan; and memoized pure functions of their arguments
# (parsing a time zone, an interval, a format), each listed here with its module.
CACHE_MODULES = {"common/bounded_cache.py", "common/segment/part_cache.py", "services/historical/core/cache_plan.py"}
MEMOIZED = {
    "common/types/granularity.py", "common/types/interval.py", "common/types/time_zone.py",
    "common/sql/statement_kind.py", "common/json/path_steps.py", "common/query/projection.py",
    "common/demo/wikipedia.py", "common/expr/functions.py", "services/transport_security.py",
}
# ``id()`` of an object as a key keeps state that the object's identity, not its value, names: a
# reused id answers for another object. Listed: a label (no state), and the projection matcher's
# spec memo (to go: it belongs on the PreparedQuery).
ID_CALLS = {"services/ingestion/spark_session.py", "common/query/projection.py"}


def _cache_smells(path: str) -> list[str]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name == "OrderedDict" and path not in CACHE_MODULES:
            out.append(f"{path}:{node.lineno} an OrderedDict (a hand-rolled LRU?): use common/bounded_cache.py")
        if name in ("lru_cache", "cache") and isinstance(node, (ast.Name, ast.Attribute)) and \
                (name == "lru_cache" or (isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "functools")) \
                and path not in MEMOIZED:
            out.append(f"{path}:{node.lineno} functools.{name}: keep state in common/bounded_cache.py "
                       f"(or list a pure function's memo in MEMOIZED)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id" \
                and path not in ID_CALLS:
            out.append(f"{path}:{node.lineno} id(...): key kept state by a typed value, not an object's identity")
    return out


def test_no_cache_outside_the_runtime():
    bad = [smell for m in COMMON + SERVICES for smell in _cache_smells(m)]
    assert bad == [], "kept state outside the runtime's caches:\n" + "\n".join(bad)


def test_the_cache_rule_catches_a_new_cache(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "ROOT", str(tmp_path))
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "kept.py").write_text(
        "import functools\nfrom collections import OrderedDict\n_K = OrderedDict()\n"
        "@functools.lru_cache(maxsize=8)\ndef f(x):\n    return x\n"
        "def g(q, memo={}):\n    return memo.setdefault(id(q), q)\n")
    found = _cache_smells("common/kept.py")
    assert any("OrderedDict" in s for s in found)
    assert any("functools.lru_cache" in s for s in found) and any("id(...)" in s for s in found)
